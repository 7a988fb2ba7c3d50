"""What a resume restores beyond Lightning's own state: every rank's RNG states and recurrent state.

A checkpoint keeps, under :data:`RANKS`, one entry per rank (gathered to rank 0, which writes the file);
a resume gives rank r saved rank r's RNG states (r modulo their number) and, when the number of
processes is the same, its recurrent state (:meth:`repro.train.module.LMModule.on_load_checkpoint`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from repro.store import checkpoints
from repro.train import distributed

RANKS = "repro_ranks"  # a checkpoint's per-rank state: [{"rng": ..., "state": ...}] in rank order


def saved_ranks(checkpoint: dict[str, Any]) -> list[dict[str, Any]]:
    """A checkpoint's per-rank state (one rank for a checkpoint written before DDP state was saved)."""
    if RANKS in checkpoint:
        return checkpoint[RANKS]
    return [{"rng": checkpoint["repro_rng"], "state": checkpoint["repro_model_state"]}]


def rng_state() -> dict[str, Any]:
    """Every RNG's state as tensors and plain data (a checkpoint loads with ``weights_only``)."""
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def warn_repartition(path: Path, world: distributed.World, echo: Callable[[str], None]) -> None:
    """One line when the checkpoint was written by another number of processes."""
    saved = saved_ranks(checkpoints.load(path, mmap=True))
    if len(saved) == world.processes:
        return
    caches = any(rank["state"] is not None for rank in saved)
    echo(
        f"  warning: the checkpoint was written by {len(saved)} process(es), this run has {world.processes}: "
        + ("the recurrent caches start empty (the streams' partition changed) and " if caches else "")
        + "the random streams are dealt anew, so the run no longer equals an uninterrupted one"
    )
