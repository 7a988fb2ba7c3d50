"""A stored run's trained model, loaded for use (``repro sample``, the recipe checks)."""

from __future__ import annotations

import torch

from repro import data as datasets
from repro.config.spec import RunSpec, from_record
from repro.errors import UserError
from repro.models.base import LanguageModel
from repro.store import checkpoints
from repro.store.runs import RunDir
from repro.train import retrain, samebits
from repro.train.module import LMModule
from repro.train.selection import load_selected


def load_trained(run: RunDir, device: torch.device | str = "cpu") -> tuple[LanguageModel, RunSpec, object, object]:
    """The model of a stored run with the weights it scored (last or best), its spec, vocabulary and dataset info."""
    found = checkpoints.latest(run.checkpoints, run_id=run.run_id)
    if found is None:
        raise UserError(no_checkpoint(run))
    spec = from_record(run.spec())
    _, vocab = datasets.open_split(spec.data.name, "valid", **spec.data.options())
    info = datasets.dataset_info(spec.data.name)
    module = LMModule(spec, vocab.size, info.shape)
    module.load_state_dict(checkpoints.load(found[0])["state_dict"])
    load_selected(spec, run.checkpoints, module.model)  # the weights the run scored
    return module.model.to(device).eval(), spec, vocab, info


def no_checkpoint(run: RunDir) -> str:
    """What ``repro sample`` says of a stored run without a checkpoint (a clone's): its retrained copy, where
    one was kept apart (``repro run --retrain-checkpoint``, :mod:`repro.train.retrain`), else the command
    that retrains it, and, where it cannot give the stored bits here, why and where its copy will be."""
    said = f"{run.path}: no checkpoint (checkpoints are not committed)"
    stored, summary = run.spec(), run.summary()
    copy = retrain.copy_of(run)
    if copy.finished and copy.last_checkpoint is not None:
        off = samebits.differences(summary, copy.summary())
        bits = f": {samebits.shown(off)}, not the stored bits" if off else ""
        return f"{said}; its retrained copy has one{bits}: `repro sample {copy.path}` samples it"
    name = stored.get("manifest", run.path.parent.name)
    command = f"repro run {name} --scale {stored.get('scale')} --run-id {run.run_id} --retrain-checkpoint"
    said += f"; `{command}` trains it again"
    foreseen = samebits.reasons(stored, summary)
    if foreseen:
        return (
            f"{said}, though it is not expected to give the stored bits ({'; '.join(foreseen)}): then it keeps "
            f"the retrained copy apart, under {copy.path}, which `repro sample {copy.path}` samples"
        )
    return f"{said}, checks that it reproduces the stored bits and keeps its checkpoint"
