"""The run store: ``<results>/runs/<manifest>/<run_id>/`` with spec.yaml, metrics.csv, summary.json.

Every file is written atomically (temp file in the same directory, then rename), so a reader or an
interrupted writer never sees half a file. ``table`` flattens the store into one pandas row per run.
"""
from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

FINISHED, RUNNING, FAILED = "finished", "running", "failed"


def results_root(path: str | Path | None = None) -> Path:
    return Path(path or os.environ.get("REPRO_RESULTS") or "results")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode())


SOURCES = "sources"  # <results>/sources/<manifest>.json: where a manifest outside experiments/ came from


def record_source(root: Path, manifest: str, path: Path, args: list[str]) -> None:
    """Remember the file (and command-line overrides) of a manifest that discovery does not find, so that
    later commands can name it by its name."""
    source = {"path": str(path.resolve()), "args": list(args)}
    target = root / SOURCES / f"{manifest}.json"
    if not target.exists() or json.loads(target.read_text()) != source:
        write_atomic(target, json.dumps(source, indent=2) + "\n")


def sources(root: Path) -> dict[str, dict[str, Any]]:
    """Manifest name -> {path, args} of every manifest the store was told about by :func:`record_source`."""
    out = {}
    for path in sorted((root / SOURCES).glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a damaged record only loses the name lookup; the path still works
    return out


def finished_twin(root: Path, manifest: str, run_id: str) -> "RunDir | None":
    """A finished run with this id stored under another manifest (same spec, same result)."""
    for summary in sorted((root / "runs").glob(f"*/{run_id}/summary.json")):
        other = RunDir(root, summary.parent.parent.name, run_id)
        if other.path.parent.name != manifest and other.finished and "reused_from" not in other.summary():
            return other
    return None


class RunDir:
    """One run's directory."""

    def __init__(self, root: Path, manifest: str, run_id: str):
        self.path = root / "runs" / manifest / run_id
        self.run_id = run_id

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def last_checkpoint(self) -> Path | None:
        last = self.checkpoints / "last.ckpt"
        return last if last.exists() else None

    def summary(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / "summary.json").read_text())
        except FileNotFoundError:
            return {}

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_atomic(self.path / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")

    def update_summary(self, **values: Any) -> dict[str, Any]:
        summary = {**self.summary(), **values}
        self.write_summary(summary)
        return summary

    def write_spec(self, spec: dict[str, Any]) -> None:
        write_atomic(self.path / "spec.yaml", yaml.safe_dump(spec, sort_keys=False))

    def spec(self) -> dict[str, Any]:
        return yaml.safe_load((self.path / "spec.yaml").read_text())

    def write_arrays(self, name: str, arrays: dict[str, Any]) -> None:
        """Numpy arrays of a run (e.g. attention statistics for a figure), written atomically."""
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        write_bytes_atomic(self.path / name, buffer.getvalue())

    def arrays(self, name: str) -> dict[str, Any]:
        with np.load(self.path / name) as npz:
            return {k: npz[k] for k in npz.files}

    def adopt(self, source: "RunDir", manifest: str, cell: dict[str, Any]) -> dict[str, Any]:
        """Take over a finished run of the same spec stored under another manifest (the run id is the
        spec's hash, so the result is the same): files copied, the checkpoint hard-linked when possible."""
        self.path.mkdir(parents=True, exist_ok=True)
        for name in ("metrics.csv", "analysis.npz"):
            if (source.path / name).exists():
                write_bytes_atomic(self.path / name, (source.path / name).read_bytes())
        if source.last_checkpoint is not None:
            self.checkpoints.mkdir(exist_ok=True)
            try:
                os.link(source.last_checkpoint, self.checkpoints / "last.ckpt")
            except OSError:
                pass  # another filesystem: `repro sample` then needs the source run's checkpoint
        self.write_spec({**source.spec(), "manifest": manifest, "cell": cell})
        summary = {**source.summary(), "manifest": manifest, "cell": cell,
                   "reused_from": source.path.parent.name}
        self.write_summary(summary)
        return summary

    @property
    def finished(self) -> bool:
        return self.summary().get("status") == FINISHED

    # metrics.csv: one row per logged step; columns grow as new metrics appear.
    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.csv"

    def metrics(self) -> pd.DataFrame:
        return pd.read_csv(self.metrics_path) if self.metrics_path.exists() else pd.DataFrame()

    def append_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Append rows, rewriting the file atomically when a new column appears."""
        if not rows:
            return
        old = self.metrics()
        columns = list(old.columns) if not old.empty else []
        new_cols = [k for row in rows for k in row if k not in columns]
        if new_cols or old.empty:
            merged = pd.concat([old, pd.DataFrame(rows)], ignore_index=True)
            write_atomic(self.metrics_path, merged.to_csv(index=False))
            return
        with open(self.metrics_path, "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=columns).writerows(rows)

    def truncate_metrics(self, after_step: int) -> None:
        """Drop rows logged after ``after_step`` (a resumed run logs them again)."""
        old = self.metrics()
        if not old.empty and (old["step"] > after_step).any():
            write_atomic(self.metrics_path, old[old["step"] <= after_step].to_csv(index=False))


SECTIONS = ("data", "model", "train", "eval")


def table(root: Path, manifest: str | None = None) -> pd.DataFrame:
    """The tidy table of the store: one row per stored run with manifest, run_id, scale, the grid cell's
    keys, the resolved spec flattened into dotted columns (``model.span.limit``), then every key of
    the summary (lists such as per-head spans included)."""
    rows = []
    base = root / "runs"
    dirs = sorted((base / manifest).glob("*/spec.yaml")) if manifest else sorted(base.glob("*/*/spec.yaml"))
    for spec_path in dirs:
        run = RunDir(root, spec_path.parent.parent.name, spec_path.parent.name)
        spec = run.spec()
        summary = run.summary()
        row = {"manifest": run.path.parent.name, "run_id": run.run_id, "scale": spec.get("scale"),
               **(spec.get("cell") or {}), "status": summary.get("status", "pending")}
        for section in SECTIONS:
            row.update(_flatten(spec.get(section) or {}, section))
        row.update({k: v for k, v in summary.items() if k not in row and not isinstance(v, dict)})
        rows.append(row)
    return pd.DataFrame(rows)


def _flatten(tree: dict[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}"
        out.update(_flatten(value, name) if isinstance(value, dict) else {name: value})
    return out
