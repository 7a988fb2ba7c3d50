"""The official fixture (fixtures/official-tiny8: a checkpoint the official code trained and evaluated),
the overrides that describe it to ``repro import official``, and edited copies of its checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import torch

FIXTURE = Path(__file__).parent / "fixtures" / "official-tiny8"
CHECKPOINT = FIXTURE / "tiny8.pt"
OFFICIAL = json.loads((FIXTURE / "official.json").read_text())
# what the tensors do not say: the fixture's corpus, block and training flags (official.json)
OVERRIDES = [
    "data.name=file",
    f"data.path={FIXTURE / 'tiny8.txt'}",
    "data.kind=text8",
    "data.block=64",
    "model.dropout=0.1",
    "model.span.loss_coef=2e-6",
    "model.span.init=0.125",
]


def edited_checkpoint(folder: Path, edit) -> Path:
    """The fixture's checkpoint with ``edit`` applied to its model's state dict, saved under ``folder``."""
    raw = torch.load(CHECKPOINT, weights_only=True)
    edit(raw["model"])
    path = folder / "edited.pt"
    torch.save(raw, path)
    return path
