"""A stored run's trained model, loaded for use (``repro sample``, the recipe checks)."""

from __future__ import annotations

import torch

from repro import data as datasets
from repro.config.spec import RunSpec, from_record
from repro.errors import UserError
from repro.models.base import LanguageModel
from repro.store import checkpoints
from repro.store.runs import RunDir
from repro.train.module import LMModule
from repro.train.selection import load_selected


def load_trained(run: RunDir, device: torch.device | str = "cpu") -> tuple[LanguageModel, RunSpec, object, object]:
    """The model of a stored run with the weights it scored (last or best), its spec, vocabulary and dataset info."""
    found = checkpoints.latest(run.checkpoints, run_id=run.run_id)
    if found is None:
        stored = run.spec()
        name = stored.get("manifest", run.path.parent.name)
        raise UserError(
            f"{run.path}: no checkpoint (checkpoints are not committed); `repro run {name} --scale "
            f"{stored.get('scale')} --run-id {run.run_id} --retrain-checkpoint` trains it again, checks that it "
            "reproduces the stored bits and keeps its checkpoint"
        )
    spec = from_record(run.spec())
    _, vocab = datasets.open_split(spec.data.name, "valid", **spec.data.options())
    info = datasets.dataset_info(spec.data.name)
    module = LMModule(spec, vocab.size, info.shape)
    module.load_state_dict(checkpoints.load(found[0])["state_dict"])
    load_selected(spec, run.checkpoints, module.model)  # the weights the run scored
    return module.model.to(device).eval(), spec, vocab, info
