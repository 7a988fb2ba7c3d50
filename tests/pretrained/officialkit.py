"""The official fixture (fixtures/official-tiny8: a checkpoint the official code trained and evaluated) and
the overrides that describe it to ``repro import official``."""

from __future__ import annotations

import json
from pathlib import Path

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
