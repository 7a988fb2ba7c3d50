"""Experiment tracking: the run store's own metrics logger, and W&B through Lightning's WandbLogger.

W&B mode: ``online`` when credentials exist (``WANDB_API_KEY`` or a netrc entry for the W&B host),
``offline`` otherwise (``repro sync`` uploads later), ``disabled`` by ``--no-wandb`` or
``WANDB_MODE=disabled``. One W&B group per manifest, job_type = model family, run name = the grid
cell in words, tags = paper, scale and renders, config = the resolved spec. The store is written in
every mode, so reports never need the network.
"""
from __future__ import annotations

import netrc
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from repro.errors import UserError
from repro.spec import RunSpec
from repro.store import RunDir

PROJECT = os.environ.get("REPRO_WANDB_PROJECT", "repro")


class StoreLogger(Logger):
    """Appends logged metrics to the run's metrics.csv (buffered; flushed with every checkpoint)."""

    def __init__(self, run: RunDir):
        super().__init__()
        self.run = run
        self._rows: dict[int, dict[str, Any]] = {}

    @property
    def name(self) -> str:
        return "store"

    @property
    def version(self) -> str:
        return self.run.run_id

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass  # spec.yaml holds them

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        row = self._rows.setdefault(int(step or 0), {"step": int(step or 0)})
        row.update({k: float(v) for k, v in metrics.items() if k != "epoch"})

    @rank_zero_only
    def save(self) -> None:
        self.run.append_metrics([self._rows[s] for s in sorted(self._rows)])
        self._rows.clear()

    @rank_zero_only
    def finalize(self, status: str) -> None:
        self.save()


def has_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


def resolve_mode(no_wandb: bool) -> str:
    if no_wandb or os.environ.get("WANDB_MODE") == "disabled":
        return "disabled"
    if os.environ.get("WANDB_MODE") == "offline":
        return "offline"
    return "online" if has_credentials() else "offline"


def wandb_logger(mode: str, spec: RunSpec, paper: str, renders: list[str], run: RunDir):
    """A WandbLogger for this run (resuming its W&B run when one exists), or None when disabled."""
    if mode == "disabled":
        return None
    from lightning.pytorch.loggers import WandbLogger

    logger = WandbLogger(
        project=PROJECT, group=spec.manifest, job_type=spec.family, name=spec.cell_name,
        tags=[paper, spec.scale, *renders], config={**spec.resolved(), "scale": spec.scale, "cell": spec.cell},
        save_dir=str(run.path), offline=(mode == "offline"), id=run.summary().get("wandb_run_id"),
        resume="allow",
    )
    return logger


def offline_runs(results: Path) -> list[Path]:
    return sorted(results.glob("runs/*/*/wandb/offline-run-*"))


def sync(results: Path) -> list[Path]:
    """Upload every offline W&B run under ``results`` with ``wandb sync``; returns the synced folders."""
    runs = offline_runs(results)
    if not runs:
        return []
    if not has_credentials():
        raise UserError(f"{len(runs)} offline W&B run(s) wait under {results}/runs, but no W&B credentials "
                        "were found; run `wandb login` (or set WANDB_API_KEY) and retry")
    exe = shutil.which("wandb")
    if exe is None:
        raise UserError("the `wandb` command is not on PATH; install wandb")
    for path in runs:
        subprocess.run([exe, "sync", str(path)], check=True)
    return runs
