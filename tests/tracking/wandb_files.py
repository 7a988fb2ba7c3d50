"""A local stand-in for W&B's public API, built from a real offline run's files (no network).

``read_run`` decodes an offline run's transaction log (``run-<id>.wandb``: LevelDB log framing of
protobuf ``Record`` messages, after a 7-byte W&B header) into what the server would hold: config,
summary, history rows, group, job type, saved files. ``FakeApi`` serves those runs through the
subset of ``wandb.Api`` that ``repro.track.pull`` uses.
"""

from __future__ import annotations

import json
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2 as pb

BLOCK, HEADER, W_AND_B = 32768, 7, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[pb.Record]:
    data = path.read_bytes()
    assert data[1:4] == b"W&B", f"{path}: not a W&B transaction log"
    out, pos, pending = [], W_AND_B, b""
    while pos + HEADER <= len(data):
        room = BLOCK - pos % BLOCK
        if room < HEADER:
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(pending + chunk if kind == LAST else chunk)
            out.append(record)
            pending = b""
        elif kind in (FIRST, MIDDLE):
            pending = (b"" if kind == FIRST else pending) + chunk
        else:  # zero padding at the end of a block
            pos += room - HEADER - length
    return out


def _set(tree: dict, keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        tree = tree.setdefault(key, {})
    tree[keys[-1]] = value


def _items(items) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        _set(out, list(item.nested_key) or [item.key], json.loads(item.value_json))
    return out


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
