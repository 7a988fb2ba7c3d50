"""``repro pull``: the runs of a manifest's W&B group -> the run store, so ``repro report`` draws runs
trained on another machine.

Each W&B run becomes ``runs/<manifest>/<run_id>/``: spec.yaml from its config (kept only when the
config resolves to one of the manifest's specs at its scale), metrics.csv from its history (per-head
series arrive as W&B has them: a mean per layer), summary.json from its summary, analysis.npz from
its files. A run is written into a temporary folder and renamed into place, so a failed pull leaves
nothing half-written. Runs already in the store, unfinished runs and report runs are left alone.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import wandb

from repro.config.manifest import Manifest
from repro.config.spec import SpecError, from_record
from repro.errors import UserError
from repro.store.runs import RunDir
from repro.track.loggers import PROJECT, STEP


@dataclass
class Pulled:
    written: list[str] = field(default_factory=list)  # run ids
    present: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (W&B run, why)


def public_api(entity: str | None, project: str | None):
    """The W&B public API (honours ``WANDB_BASE_URL`` and the stored login)."""
    try:
        return wandb.Api(overrides={k: v for k, v in (("entity", entity), ("project", project)) if v})
    except Exception as err:  # no login, no network: wandb raises its own types
        raise UserError(f"W&B API unavailable: {str(err).strip().splitlines()[0]}") from None


def pull(
    manifest: Manifest,
    root: Path,
    api: Any,
    entity: str | None = None,
    project: str | None = None,
    echo: Callable[[str], None] = print,
) -> Pulled:
    """Write the finished runs of the manifest's W&B group into the store; returns what happened."""
    path = "/".join(p for p in (entity, project or PROJECT) if p)
    try:
        runs = list(api.runs(path, filters={"group": manifest.name}))
    except Exception as err:
        raise UserError(f"W&B runs of {path} (group {manifest.name}): {str(err).strip().splitlines()[0]}") from None
    done = Pulled()
    for wb in runs:
        if getattr(wb, "job_type", None) == "report":
            continue
        label = f"{wb.id} ({wb.name})"
        if wb.state != "finished":
            done.left_out.append((label, f"W&B state {wb.state}, not finished"))
            continue
        try:
            spec = _resolve(manifest, wb.config)
        except ValueError as err:
            done.left_out.append((label, str(err)))
            continue
        target = RunDir(root, manifest.name, spec.run_id)
        if (target.path / "spec.yaml").exists():
            done.present.append(spec.run_id)
            echo(f"  {spec.run_id}  {spec.cell_name}: already in the store, skipped")
            continue
        try:
            _write(wb, spec.record(wb.config.get("code_version")), target, f"{path}/{wb.id}")
        except Exception as err:  # the network, the server: this run is left out, nothing is written
            done.left_out.append((label, f"download failed: {type(err).__name__}: {err}"))
            continue
        done.written.append(spec.run_id)
        echo(f"  {spec.run_id}  {spec.cell_name}: pulled from W&B run {wb.id}")
    for label, why in done.left_out:
        echo(f"  left out W&B run {label}: {why}")
    return done


def _resolve(manifest: Manifest, config: dict[str, Any]):
    """The manifest's RunSpec that the W&B config describes; ValueError saying why when none does."""
    scale = config.get("scale")
    if scale not in manifest.scale_names():
        raise ValueError(f"config scale {scale!r} is not a scale of {manifest.name}")
    try:
        spec = from_record({**config, "manifest": manifest.name})
    except SpecError as err:
        raise ValueError(f"config is not a valid spec: {err}") from None
    known = {s.run_id: s for s in manifest.expand(scale)}
    if spec.run_id not in known:
        raise ValueError(
            f"config resolves to run {spec.run_id}, not one of the {len(known)} runs of "
            f"{manifest.name} at scale {scale}"
        )
    return known[spec.run_id]


def _write(wb: Any, record: dict[str, Any], target: RunDir, source: str) -> None:
    root = target.path.parents[2]
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".pull-", dir=root))
    try:
        staged = RunDir(tmp, record["manifest"], record["run_id"])
        staged.write_spec(record)
        history = list(wb.scan_history())
        metrics = history_frame(history)
        if not metrics.empty:
            staged.append_metrics(metrics.to_dict("records"))
        logged = {key for row in history for key in row}
        staged.write_summary({**store_summary(wb.summary_metrics, logged), "pulled_from": source})
        for f in wb.files(names=["analysis.npz"]):
            if f.name == "analysis.npz":
                f.download(root=str(staged.path), replace=True)
        target.path.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staged.path, target.path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def store_summary(summary: dict[str, Any], logged: set[str]) -> dict[str, Any]:
    """The store's summary.json inside a W&B summary: what is neither a logged metric's last value
    nor W&B's own (``_``-prefixed)."""
    return {k: v for k, v in summary.items() if k not in logged and not k.startswith("_")}


def history_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """W&B history rows -> metrics.csv rows: one per training step, numeric metrics only."""
    merged: dict[int, dict[str, float]] = {}
    for row in rows:
        if row.get(STEP) is None:
            continue
        step = int(row[STEP])
        out = merged.setdefault(step, {"step": step})
        for key, value in row.items():
            if key.startswith("_") or key in (STEP, "epoch") or isinstance(value, bool):
                continue
            if isinstance(value, (int, float)) and math.isfinite(value):
                out[key] = float(value)
    frame = pd.DataFrame([merged[s] for s in sorted(merged)])
    return frame[["step", *sorted(c for c in frame.columns if c != "step")]] if not frame.empty else frame


def describe(done: Pulled) -> str:
    return f"pulled {len(done.written)} run(s), {len(done.present)} already in the store, {len(done.left_out)} left out"
