"""Which weights a run scores: the last ones, or (``train.select: best_valid``) those of the best quick
validation, as the Sparse Transformer paper scores the model whose validation loss stopped improving.

:class:`BestCheckpoint` keeps the best weights in ``checkpoints/best.ckpt`` ({state_dict, step, bits},
written atomically and read back as plain data, as every checkpoint: ``repro.store.checkpoints``);
:func:`load_selected` puts the selected weights into a model before it is scored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from repro.config.spec import RunSpec
from repro.files import atomic
from repro.models.base import LanguageModel
from repro.store import checkpoints
from repro.train.module import LMModule

BEST = "best.ckpt"


class BestCheckpoint(pl.Callback):
    """Saves the model's weights whenever a quick validation (``pl_module.last_quick_valid``, a (step,
    bits) pair) beats every earlier one.

    The module validates in its own ``on_train_batch_end``, which Lightning calls after the callbacks',
    so a result is taken up at the next batch's start (the weights have not moved since) or at the end
    of training; the Trainer (:mod:`repro.train.fit`) lists this callback before the one that saves ``last.ckpt`` there. A resumed
    run starts from the best saved at or before its checkpoint's step (a later one is redone)."""

    def __init__(self, directory: Path):
        self.path = directory / BEST
        self.best: tuple[int, float] | None = None
        self._seen: tuple[int, float] | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: LMModule) -> None:
        saved = _read(self.path)
        self.best = None
        if saved is not None and saved["step"] <= trainer.global_step:  # a later one: not the resumed trajectory
            self.best = (saved["step"], saved["bits"])

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: LMModule, batch: Any, batch_idx: int) -> None:
        self._consider(trainer, pl_module)

    def on_train_end(self, trainer: pl.Trainer, pl_module: LMModule) -> None:
        self._consider(trainer, pl_module)

    def _consider(self, trainer: pl.Trainer, pl_module: LMModule) -> None:
        latest = pl_module.last_quick_valid
        if latest is None or latest == self._seen:
            return
        self._seen = latest
        if self.best is not None and latest[1] >= self.best[1]:
            return
        self.best = latest
        if trainer.is_global_zero:
            with atomic.replacing(self.path) as fh:
                torch.save({"state_dict": pl_module.model.state_dict(), "step": latest[0], "bits": latest[1]}, fh)


def callbacks(spec: RunSpec, directory: Path) -> list[pl.Callback]:
    """The callbacks the spec's selection needs."""
    return [BestCheckpoint(directory)] if spec.train.select == "best_valid" else []


def _read(path: Path) -> dict[str, Any] | None:
    """best.ckpt's contents, or None when there is none or it is corrupt (a kill cannot leave it so: it is
    written atomically; a damaged disk can)."""
    if not path.exists():
        return None
    try:
        return checkpoints.load(path)
    except checkpoints.CorruptCheckpoint:
        return None


def load_selected(spec: RunSpec, directory: Path, model: LanguageModel) -> dict[str, Any]:
    """Load the selected weights into ``model`` (already holding the last ones); returns the summary keys
    that say which were scored."""
    saved = _read(directory / BEST) if spec.train.select == "best_valid" else None
    if saved is None:
        return {"selected": "last"}
    model.load_state_dict(saved["state_dict"])
    return {
        "selected": "best_valid",
        "selected_step": int(saved["step"]),
        "selected_valid_bits_quick": float(saved["bits"]),
    }
