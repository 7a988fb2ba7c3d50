"""A stored run's trained model, loaded for use (``repro sample``, the recipe checks)."""

from __future__ import annotations

from pathlib import Path

import torch

from repro import data as datasets
from repro.config.spec import RunSpec, from_record
from repro.errors import UserError
from repro.models.base import LanguageModel
from repro.replay import checkpoint, samebits
from repro.store import checkpoints
from repro.store.runs import RunDir
from repro.train.module import LMModule
from repro.train.selection import load_selected


def load_trained(run: RunDir, device: torch.device | str = "cpu") -> tuple[LanguageModel, RunSpec, object, object]:
    """The model of a stored run with the weights it scored (last or best), its spec, vocabulary and dataset info."""
    spec = from_record(run.spec())
    path = _checkpoint(run, spec)
    _, vocab = datasets.open_split(spec.data.name, "valid", **spec.data.options())
    info = datasets.dataset_info(spec.data.name)
    module = LMModule(spec, vocab.size, info.shape)
    module.load_state_dict(checkpoints.load(path)["state_dict"])
    load_selected(spec, run.checkpoints, module.model)  # the weights the run scored
    return module.model.to(device).eval(), spec, vocab, info


def _checkpoint(run: RunDir, spec: RunSpec) -> Path:
    """The checkpoint to load: a finished run's of its last step (an earlier one, left where a damaged
    last.ckpt was passed over, holds weights the run did not score), an unfinished run's newest good one;
    else one line saying why and which command trains it."""
    if run.finished:
        path, why = checkpoints.at_step(run.checkpoints, spec.train.steps, run.run_id)
    else:
        found, passed = checkpoints.newest(run.checkpoints, run.run_id)
        path, why = (found[0] if found else None), "; ".join(passed) or "no checkpoint"
    if path is not None:
        return path
    command = f"`repro run {spec.manifest} --scale {spec.scale} --run-id {run.run_id}"
    if not run.finished:
        raise UserError(f"{run.path}: {why}; {command}` trains it")
    if why == "no checkpoint":  # a clone's: its retrained copy, or the command that makes one
        raise UserError(no_checkpoint(run))
    raise UserError(
        f"{run.path}: {why}; {command} --retrain-checkpoint` trains it again, checks that it reproduces the "
        "stored bits and keeps its checkpoint"
    )


def no_checkpoint(run: RunDir) -> str:
    """What ``repro sample`` says of a stored run without a checkpoint (a clone's): its retrained copy, where
    one was kept apart (``repro run --retrain-checkpoint``, :mod:`repro.replay.checkpoint`), else the command
    that retrains it, and, where it cannot give the stored bits here, why and where its copy will be."""
    said = f"{run.path}: no checkpoint (checkpoints are not committed)"
    stored, summary = run.spec(), run.summary()
    copy = checkpoint.copy_of(run)
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
