"""W&B's own local record of a run read back: the transaction log (``run-<id>.wandb``) W&B writes beside
every run, offline or online, under ``<results>/wandb/`` (LevelDB log framing of protobuf ``Record``
messages after a 7-byte W&B header). A log a kill cut short reads up to its last complete record; a
damaged value is left out.

The runner compares it with the store, the truth, to re-send what a kill took from W&B's buffers.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BLOCK, HEADER, W_AND_B = 32768, 7, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list:
    """The complete records of one transaction log (none when it is not one)."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2 as pb

    try:
        data = path.read_bytes()
    except OSError:
        return []
    if data[1:4] != b"W&B":
        return []
    out, pos, pending = [], W_AND_B, b""
    while pos + HEADER <= len(data):
        room = BLOCK - pos % BLOCK
        if room < HEADER:
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        chunk = data[pos + HEADER : pos + HEADER + length]
        if len(chunk) < length:  # cut short
            break
        pos += HEADER + length
        if kind in (FULL, LAST):
            record = pb.Record()
            try:
                record.ParseFromString(pending + chunk if kind == LAST else chunk)
            except DecodeError:
                break
            out.append(record)
            pending = b""
        elif kind in (FIRST, MIDDLE):
            pending = (b"" if kind == FIRST else pending) + chunk
        else:  # zero padding at the end of a block
            pos += room - HEADER - length
    return out


def items(entries) -> dict[str, Any]:
    """A record's config/summary/history items as a nested dict. An item whose value does not read as
    JSON (a damaged log: the framing holds no checksum we check) is left out: W&B does not hold it, and
    the runner sends its row again."""
    out: dict[str, Any] = {}
    for item in entries:
        try:
            value = json.loads(item.value_json)
        except (ValueError, RecursionError):
            continue
        keys = list(item.nested_key) or [item.key]
        tree = out
        for key in keys[:-1]:
            tree = tree.setdefault(key, {})
        tree[keys[-1]] = value
    return out


def history(folder: Path, run_id: str) -> list[dict[str, Any]]:
    """Every history row W&B recorded locally for run ``run_id`` under ``folder``, over all its sessions
    (a resumed run gets one run folder per session)."""
    rows = []
    for log in sorted(folder.glob(f"*run-*-{run_id}/run-{run_id}.wandb")):
        rows += [items(r.history.item) for r in records(log) if r.WhichOneof("record_type") == "history"]
    return rows
