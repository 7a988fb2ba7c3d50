"""A local stand-in for W&B's public API, built from a real offline run's files (no network).

``read_run`` decodes an offline run's transaction log (``run-<id>.wandb``: LevelDB log framing of
protobuf ``Record`` messages, after a 7-byte W&B header) into what the server would hold: config,
summary, history rows, group, job type, saved files. ``FakeApi`` serves those runs through the
subset of ``wandb.Api`` that ``repro.track.pull`` uses.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2 as pb

from repro.track import wandb_log


def records(path: Path) -> list[pb.Record]:
    assert path.read_bytes()[1:4] == b"W&B", f"{path}: not a W&B transaction log"
    return wandb_log.records(path)


_items = wandb_log.items


def _set(tree: dict, keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        tree = tree.setdefault(key, {})
    tree[keys[-1]] = value


@dataclass
class FakeFile:
    name: str
    source: Path

    def download(self, root: str = ".", replace: bool = False, exist_ok: bool = False):
        shutil.copyfile(self.source, Path(root) / self.name)


@dataclass
class FakeRun:
    folder: Path
    id: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""
    state: str = "running"
    config: dict[str, Any] = field(default_factory=dict)
    summary_metrics: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def scan_history(self):
        return iter(self.rows)

    def files(self, names: list[str] | None = None):
        found = [FakeFile(p.name, p) for p in sorted((self.folder / "files").glob("*")) if p.is_file()]
        return [f for f in found if not names or f.name in names]


def read_run(folder: Path) -> FakeRun:
    """One offline run folder as the server would see it once synced."""
    (log,) = folder.glob("*.wandb")
    run = FakeRun(folder)
    for record in records(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.id, run.name, run.group, run.job_type = r.run_id, r.display_name, r.run_group, r.job_type
            run.config.update({k: v for k, v in _items(r.config.update).items() if k != "_wandb"})
        elif kind == "config":
            run.config.update({k: v for k, v in _items(record.config.update).items() if k != "_wandb"})
        elif kind == "summary":
            for item in record.summary.update:
                _set(run.summary_metrics, list(item.nested_key) or [item.key], json.loads(item.value_json))
        elif kind == "history":
            run.rows.append(_items(record.history.item))
        elif kind == "exit":
            run.state = "finished" if record.exit.exit_code == 0 else "failed"
    return run


class FakeApi:
    """``wandb.Api().runs(path, filters={"group": ...})`` over offline run folders."""

    def __init__(self, folders: list[Path]):
        self.all = [read_run(f) for f in folders]
        self.calls: list[tuple[str, dict]] = []

    def runs(self, path: str, filters: dict | None = None):
        self.calls.append((path, dict(filters or {})))
        group = (filters or {}).get("group")
        return [r for r in self.all if group is None or r.group == group]
