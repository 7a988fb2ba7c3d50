"""Experiment tracking: the run store's own metrics logger, and W&B through Lightning's WandbLogger.

W&B mode: ``online`` when credentials exist (``WANDB_API_KEY`` or a netrc entry for the W&B host,
``WANDB_BASE_URL`` for a self-hosted server), ``offline`` otherwise (``repro sync`` uploads later),
``disabled`` by ``--no-wandb`` or ``WANDB_MODE=disabled``. Every run of a results root writes under
``<results>/wandb/``, so the W&B CLI's own commands work on that folder. One W&B group per manifest,
job_type = model family, run name = the grid cell in words and the seed (``stride=16 seed=1``), tags =
paper, scale and renders. Offline, the config and summary are also written as plain files in the run's
``files/`` folder (``config.yaml``, ``wandb-summary.json``), where an online run has W&B's own.
Config: spec.yaml (resolved spec, run id, manifest, scale, cell, code version: W&B's own code capture is
off, it would hold the ``repro`` launcher script), the paper, each
grid key as a top-level column, and the model's constants (params, span_limit, ...: :data:`CONSTANTS`),
which are not logged as series. Per-head statistics (``model/spans/<layer>/<head>``) reach W&B as a
per-layer mean and, at intervals, one layers x heads heatmap; metrics.csv keeps every head.
The finished run's summary is the store's summary.json, and a copy of analysis.npz is saved with the run.
"""

from __future__ import annotations

import io
import netrc
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from lightning.pytorch.loggers import Logger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only

from repro.config.spec import RunSpec
from repro.files import atomic
from repro.store.runs import RunDir, short_names

PROJECT = os.environ.get("REPRO_WANDB_PROJECT", "repro")
STEP = "trainer/global_step"  # the one x axis of every metric (Lightning's)
HEATMAPS_PER_RUN = 20
_PER_HEAD = re.compile(r"^(?P<stat>.+)/(?P<layer>\d+)/(?P<head>\d+)$")
# model.stats() numbers fixed by the spec: config columns (W&B, the dashboard), not series drawn as lines.
# (flops_per_token and attention_window stay series: adaptive spans change them while training.)
CONSTANTS = ("model/params", "model/span_limit", "model/attn_keys_per_query")


class StoreLogger(Logger):
    """Appends logged metrics to the run's metrics.csv: buffered, written by :meth:`flush` just before
    each checkpoint (Lightning's frequent ``save`` calls do nothing), so the file never runs ahead of
    the checkpoint by more than what a restart cuts (``RunDir.cut_metrics``)."""

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
        pass  # Lightning calls this after every log call; rows go out with the checkpoints (flush)

    @rank_zero_only
    def flush(self) -> None:
        self.run.append_metrics([self._rows[s] for s in sorted(self._rows)])
        self._rows.clear()

    @rank_zero_only
    def finalize(self, status: str) -> None:
        self.flush()


def wandb_host() -> str:
    return urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"


def has_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators(wandb_host()) is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


def resolve_mode(no_wandb: bool) -> str:
    if no_wandb or os.environ.get("WANDB_MODE") == "disabled":
        return "disabled"
    if os.environ.get("WANDB_MODE") in ("offline", "dryrun"):
        return "offline"
    return "online" if has_credentials() else "offline"


def wandb_dir(root: Path) -> Path:
    """The W&B folder of a results root: every run's ``offline-run-*`` (or ``run-*``) lives here."""
    return root / "wandb"


def grid_columns(cell: dict[str, Any], taken: set[str] = frozenset()) -> dict[str, Any]:
    """A run's grid cell as top-level config columns, named as the report's tables name them."""
    names = short_names(list(cell))
    return {(names[k] if names[k] not in taken else k): v for k, v in cell.items()}


def split_constants(metrics: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A log row's series, and its :data:`CONSTANTS` by their last part (``params``)."""
    series = {k: v for k, v in metrics.items() if k not in CONSTANTS}
    return series, {k.rsplit("/", 1)[-1]: v for k, v in metrics.items() if k in CONSTANTS}


def run_config(run: RunDir, paper: str) -> dict[str, Any]:
    """W&B config of a stored run: spec.yaml, the paper, and each grid key as its own column."""
    spec = {**run.spec(), "paper": paper}
    return {**spec, **grid_columns(spec.get("cell") or {}, set(spec))}


class SpanViewLogger(WandbLogger):
    """WandbLogger that sends per-head series as a per-layer mean, plus a heatmap every ``every``-th log."""

    def __init__(self, *args: Any, heatmap_every: int = 1, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # Lightning passes anonymous=None to wandb.init, which then warns that the setting has no effect
        if self._wandb_init.get("anonymous") is None:
            self._wandb_init.pop("anonymous", None)
        self.heatmap_every = heatmap_every
        self._seen = 0
        self._last: tuple[int, dict[str, list[list[float]]]] | None = None  # unlogged latest heatmap
        self._constants: dict[str, Any] = {}  # CONSTANTS as already put into the config

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        metrics, constants = split_constants(metrics)
        if constants and constants != {k: self._constants.get(k) for k in constants}:
            self._constants.update(constants)
            self.experiment.config.update(constants, allow_val_change=True)
        metrics, grids = per_head_view(metrics)
        if grids:
            step_now = int(step or 0)
            if self._seen % self.heatmap_every == 0:
                metrics.update(heatmaps(grids, step_now))
                self._last = None
            else:
                self._last = (step_now, grids)
            self._seen += 1
        super().log_metrics(metrics, step)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        if self._last is not None and self._experiment is not None:
            step, grids = self._last
            self.experiment.log({**heatmaps(grids, step), STEP: step})
            self._last = None
        super().finalize(status)


def per_head_view(metrics: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[list[float]]]]:
    """Split ``stat/<layer>/<head>`` scalars off: returns the other metrics plus ``stat/layer<i>``
    means, and each statistic's layers x heads grid."""
    out: dict[str, Any] = {}
    cells: dict[str, dict[tuple[int, int], float]] = {}
    for key, value in metrics.items():
        match = _PER_HEAD.match(key)
        if match is None:
            out[key] = value
        else:
            cells.setdefault(match["stat"], {})[int(match["layer"]), int(match["head"])] = float(value)
    grids = {}
    for stat, values in cells.items():
        layers = 1 + max(i for i, _ in values)
        heads = 1 + max(j for _, j in values)
        grid = [[values.get((i, j), float("nan")) for j in range(heads)] for i in range(layers)]
        grids[stat] = grid
        for i, row in enumerate(grid):
            present = [v for v in row if v == v]
            out[f"{stat}/layer{i}"] = sum(present) / len(present)
    return out, grids


def heatmaps(grids: dict[str, list[list[float]]], step: int) -> dict[str, Any]:
    return {f"{stat}/heatmap": heatmap_image(grid, f"{stat} at step {step}") for stat, grid in grids.items()}


def heatmap_image(grid: list[list[float]], title: str):
    """A layers x heads heatmap as a ``wandb.Image`` (values written in the cells when they fit)."""
    import wandb  # here: every training run imports this module, and only W&B logging needs these (seconds)
    from matplotlib.figure import Figure
    from PIL import Image

    values = np.asarray(grid, dtype=float)
    layers, heads = values.shape
    fig = Figure(figsize=(1.8 + 0.6 * heads, 1.4 + 0.45 * layers), dpi=100)
    ax = fig.add_subplot()
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(heads))
    ax.set_yticks(range(layers))
    ax.set_title(title, fontsize=8)
    if layers * heads <= 96:
        for (i, j), v in np.ndenumerate(values):
            ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=6, color="white")
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    buffer.seek(0)
    return wandb.Image(Image.open(buffer), caption=title)


def run_name(spec: RunSpec) -> str:
    """A W&B run's name: its grid cell in words and its seed (``stride=16 seed=1``), so that the seeds of a
    cell are told apart in W&B's run list."""
    return f"{spec.cell_name} seed={spec.train.seed}"


def write_readable(experiment, name: str, values: dict[str, Any]) -> None:
    """An offline W&B run's config (``config.yaml``) or summary (``wandb-summary.json``) as a plain file in
    its ``files/`` folder, where an online run has W&B's own: offline, W&B keeps them only in its binary
    transaction log (``run-<id>.wandb``)."""
    import json

    import yaml

    plain = json.loads(json.dumps(values, default=str))  # numpy numbers, paths: as JSON has them
    text = yaml.safe_dump(plain, sort_keys=False) if name.endswith(".yaml") else json.dumps(plain, indent=2) + "\n"
    atomic.write_text(Path(experiment.dir) / name, text)


def wandb_logger(mode: str, spec: RunSpec, paper: str, renders: list[str], run: RunDir):
    """A W&B logger for this run (resuming its W&B run when one exists), or None when disabled.
    Call after spec.yaml is written: the config is read from it."""
    if mode == "disabled":
        return None
    root = run.path.parents[2]
    atomic.make_dirs(wandb_dir(root))
    logs = max(1, spec.train.steps // spec.train.log_every)
    logger = SpanViewLogger(
        project=PROJECT,
        group=spec.manifest,
        job_type=spec.family,
        name=run_name(spec),
        tags=[paper, spec.scale, *renders],
        config=run_config(run, paper),
        save_dir=str(root),
        offline=(mode == "offline"),
        id=run.summary().get("wandb_run_id"),
        resume="allow",
        save_code=False,  # W&B would capture the `repro` launcher script, not the code: code_version names it
        heatmap_every=max(1, logs // HEATMAPS_PER_RUN),
    )
    logger.experiment.define_metric("valid/bits_quick", step_metric=STEP, step_sync=True, summary="min")
    if mode == "offline":
        write_readable(logger.experiment, "config.yaml", run_config(run, paper))
    return logger


def resend_missing(logger, run: RunDir, before_step: int) -> int:
    """Log to W&B the store's rows before ``before_step`` (the resumed checkpoint's) that W&B's own
    local record of this run lacks: what a kill took from W&B's buffers after the store had made it
    durable. A row counts as held when W&B holds each of its metrics at its step (per-head metrics are
    held as their layer means). Returns the number of rows sent."""
    from repro.track import wandb_log

    held = {
        (int(row[STEP]), key)
        for row in wandb_log.history(wandb_dir(run.path.parents[2]), logger.experiment.id)
        if isinstance(row.get(STEP), (int, float))
        for key in row
    }
    frame = run.metrics()
    if frame.empty:
        return 0
    sent = 0
    for row in frame[frame["step"] < before_step].to_dict("records"):
        step = int(row.pop("step"))
        metrics = {k: float(v) for k, v in row.items() if v == v}
        # per-head metrics are held as layer means, CONSTANTS in the config: neither is a history column
        own = [k for k in metrics if _PER_HEAD.match(k) is None and k not in CONSTANTS]
        if metrics and any((step, k) not in held for k in own or ["train/bits"]):
            logger.log_metrics(metrics, step=step)
            sent += 1
    return sent


def finish_wandb(logger, run: RunDir) -> None:
    """Close a finished run's W&B run: its summary becomes the store's summary.json (what ``repro pull``
    writes back) and a copy of analysis.npz is saved with it (``wandb.save`` of a file outside the W&B run's
    folder leaves a symbolic link into the store there, which an upload from elsewhere, or after the store
    moved, finds broken)."""
    experiment = logger.experiment
    experiment.summary.update(run.summary())
    if experiment.offline:
        write_readable(experiment, "wandb-summary.json", run.summary())
    analysis = run.path / "analysis.npz"
    if analysis.exists():
        copy = Path(experiment.dir) / analysis.name
        atomic.write_bytes(copy, analysis.read_bytes())
        experiment.save(str(copy), base_path=experiment.dir, policy="now")
    experiment.finish()
