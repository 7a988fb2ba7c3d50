"""The run store: ``<results>/runs/<manifest>/<run_id>/`` with spec.yaml, metrics.csv, summary.json.

Every file is written atomically and durably (:mod:`repro.files.atomic`), so a reader or a killed writer
never sees half a file. One trainer per run: :meth:`RunDir.lock` is an OS lock the kernel releases when
its holder dies. A file that does not parse is :class:`CorruptFile` (listed, never a crash);
``scan``/``table`` flatten the store into one pandas row per readable run.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from repro.errors import UserError
from repro.files import atomic, safeyaml
from repro.files.locks import FileLock

FINISHED, RUNNING, FAILED, INTERRUPTED = "finished", "running", "failed", "interrupted"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
LIGHTNING_TEMP = ".temp.ckpt"  # Lightning's weight hand-over file under ddp_spawn


class CorruptFile(UserError):
    """A store file that does not parse; the message names the file and the reason."""


def check_name(name: str, what: str = "name") -> str:
    """A manifest name is one plain path component (letters, digits, ``-``, ``_``, ``.``), so that
    everything the store writes stays under the results root."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise UserError(
            f"{what}: {name!r} is not a plain name; allowed: letters, digits, '-', '_', '.', "
            "starting with a letter or digit"
        )
    return name


def results_root(path: str | Path | None = None) -> Path:
    return Path(path or os.environ.get("REPRO_RESULTS") or "results")


def short_names(keys: list[str]) -> dict[str, str]:
    """Grid keys as column names (reports, W&B configs): the last dotted part unless two keys share it."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: short if last.count(short) == 1 else k for k, short in zip(keys, last)}


SOURCES = "sources"  # <results>/sources/<manifest>.json: where a manifest outside experiments/ came from


def record_source(root: Path, manifest: str, path: Path, args: list[str]) -> None:
    """Remember the file (and command-line overrides) of a manifest that discovery does not find, so that
    later commands can name it by its name."""
    source = {"path": str(path.resolve()), "args": list(args)}
    if sources(root).get(manifest) != source:  # absent, different or unreadable: (re)written
        atomic.write_text(
            root / SOURCES / f"{check_name(manifest, 'manifest')}.json", json.dumps(source, indent=2) + "\n"
        )


def sources(root: Path) -> dict[str, dict[str, Any]]:
    """Manifest name -> {path, args} of every manifest the store was told about by :func:`record_source`."""
    out = {}
    for path in sorted((root / SOURCES).glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a damaged record only loses the name lookup; the path still works
    return out


def finished_twin(root: Path, manifest: str, run_id: str) -> RunDir | None:
    """A finished run with this id stored under another manifest (same spec, same result)."""
    for summary in sorted((root / "runs").glob(f"*/{run_id}/summary.json")):
        other = RunDir(root, summary.parent.parent.name, run_id)
        if other.path.parent.name != manifest and other.finished and "reused_from" not in other.summary():
            return other
    return None


class RunDir:
    """One run's directory."""

    def __init__(self, root: Path, manifest: str, run_id: str):
        self.path = root / "runs" / check_name(manifest, "manifest") / check_name(run_id, "run id")
        self.run_id = run_id

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def last_checkpoint(self) -> Path | None:
        last = self.checkpoints / "last.ckpt"
        return last if last.exists() else None

    def lock(self) -> FileLock:
        """``with run.lock() as lock:`` -- ``lock.held``, else ``lock.holder`` says who trains this run."""
        return FileLock(self.path / ".lock")

    def clean_temps(self) -> list[Path]:
        """Remove what killed writers left (temp files, Lightning's hand-over file). Under the lock only."""
        removed = atomic.clean_temps(self.path) + atomic.clean_temps(self.checkpoints)
        if (self.path / LIGHTNING_TEMP).exists():
            (self.path / LIGHTNING_TEMP).unlink()
            removed.append(self.path / LIGHTNING_TEMP)
        return removed

    def summary(self) -> dict[str, Any]:
        path = self.path / "summary.json"
        try:
            summary = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            raise CorruptFile(f"{path}: corrupt ({_reason(err)})") from None
        if not isinstance(summary, dict):
            raise CorruptFile(f"{path}: corrupt (expected a JSON object)")
        return summary

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic.write_text(self.path / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")

    def update_summary(self, **values: Any) -> dict[str, Any]:
        summary = {**self.summary(), **values}
        self.write_summary(summary)
        return summary

    def write_spec(self, spec: dict[str, Any]) -> None:
        atomic.write_text(self.path / "spec.yaml", yaml.safe_dump(spec, sort_keys=False))

    def spec(self) -> dict[str, Any]:
        path = self.path / "spec.yaml"
        if not path.exists():
            raise CorruptFile(f"{path}: missing")
        try:
            spec = safeyaml.read(path)
        except safeyaml.YamlError as err:
            raise CorruptFile(f"{path}: corrupt ({str(err).split(': ', 1)[-1]})") from None
        if not isinstance(spec, dict):
            raise CorruptFile(f"{path}: corrupt (expected a mapping)")
        return spec

    def write_arrays(self, name: str, arrays: dict[str, Any]) -> None:
        """Numpy arrays of a run (e.g. attention statistics for a figure), written atomically."""
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        atomic.write_bytes(self.path / name, buffer.getvalue())

    def arrays(self, name: str) -> dict[str, Any]:
        with np.load(self.path / name) as npz:
            return {k: npz[k] for k in npz.files}

    def adopt(self, source: RunDir, manifest: str, cell: dict[str, Any]) -> dict[str, Any]:
        """Take over a finished run of the same spec stored under another manifest (the run id is the
        spec's hash, so the result is the same): files copied, the checkpoint hard-linked when possible."""
        for name in ("metrics.csv", "analysis.npz"):
            if (source.path / name).exists():
                atomic.write_bytes(self.path / name, (source.path / name).read_bytes())
        if source.last_checkpoint is not None:
            atomic.make_dirs(self.checkpoints)
            # another filesystem (or already linked): `repro sample` then needs the source run's
            with contextlib.suppress(OSError):
                os.link(source.last_checkpoint, self.checkpoints / "last.ckpt")
        self.write_spec({**source.spec(), "manifest": manifest, "cell": cell})
        summary = {**source.summary(), "manifest": manifest, "cell": cell, "reused_from": source.path.parent.name}
        self.write_summary(summary)
        return summary

    @property
    def finished(self) -> bool:
        """The summary says finished and the spec reads (a corrupt file makes the run unfinished)."""
        try:
            return self.summary().get("status") == FINISHED and bool(self.spec())
        except CorruptFile:
            return False

    # metrics.csv: one row per logged step; columns grow as new metrics appear. Rows reach the file
    # with each checkpoint (appended, fsynced); a (re)start cuts what lies beyond its checkpoint.
    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.csv"

    def metrics(self) -> pd.DataFrame:
        return pd.read_csv(self.metrics_path) if self.metrics_path.exists() else pd.DataFrame()

    def append_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Append rows (fsynced), rewriting the file atomically when a new column appears."""
        if not rows:
            return
        old = self.metrics()
        columns = list(old.columns) if not old.empty else []
        new_cols = [k for row in rows for k in row if k not in columns]
        if new_cols or old.empty:
            merged = pd.concat([old, pd.DataFrame(rows)], ignore_index=True)
            atomic.write_text(self.metrics_path, merged.to_csv(index=False))
            return
        text = io.StringIO()
        csv.DictWriter(text, fieldnames=columns, lineterminator="\n").writerows(rows)
        try:
            with open(self.metrics_path, "a", newline="") as fh:
                fh.write(text.getvalue())
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as err:
            raise atomic.store_error(self.metrics_path, err) from None

    def cut_metrics(self, before_step: int) -> None:
        """Keep the complete rows logged before ``before_step`` (the step a run restarts from): a torn
        last line, and rows a killed run logged beyond its checkpoint, go."""
        if not self.metrics_path.exists():
            return
        raw = self.metrics_path.read_bytes()
        whole = raw[: raw.rfind(b"\n") + 1]
        if not whole.strip():
            self.metrics_path.unlink()
            return
        try:
            old = pd.read_csv(io.BytesIO(whole))
            kept = old[pd.to_numeric(old["step"], errors="coerce") < before_step]
        except (ValueError, KeyError, pd.errors.ParserError):
            kept = None  # unreadable: start the log afresh
        if kept is None or kept.empty:
            self.metrics_path.unlink()
        elif len(kept) < len(old) or len(whole) < len(raw):
            atomic.write_text(self.metrics_path, kept.to_csv(index=False))


SECTIONS = ("data", "model", "train", "eval")


def _reason(err: Exception) -> str:
    return err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0][:200]


def scan(root: Path, manifest: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The tidy table of the store: one row per readable stored run with manifest, run_id, scale, the
    grid cell's keys, the resolved spec flattened into dotted columns (``model.span.limit``), then every
    key of the summary (lists such as per-head spans included); and, apart, one line per run whose spec
    or summary is corrupt."""
    rows, corrupt = [], []
    base = root / "runs"
    dirs = sorted((base / manifest).glob("*/spec.yaml")) if manifest else sorted(base.glob("*/*/spec.yaml"))
    for spec_path in dirs:
        try:
            run = RunDir(root, spec_path.parent.parent.name, spec_path.parent.name)
            spec, summary = run.spec(), run.summary()
        except UserError as err:
            corrupt.append(str(err))
            continue
        row = {
            "manifest": run.path.parent.name,
            "run_id": run.run_id,
            "scale": spec.get("scale"),
            **(spec.get("cell") or {}),
            "status": summary.get("status", "pending"),
        }
        for section in SECTIONS:
            row.update(_flatten(spec.get(section) or {}, section))
        row.update({k: v for k, v in summary.items() if k not in row and not isinstance(v, dict)})
        rows.append(row)
    return pd.DataFrame(rows), corrupt


def table(root: Path, manifest: str | None = None) -> pd.DataFrame:
    """:func:`scan`'s rows of the readable runs."""
    return scan(root, manifest)[0]


def _flatten(tree: dict[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}"
        out.update(_flatten(value, name) if isinstance(value, dict) else {name: value})
    return out
