"""The store's index: per manifest, ``<results>/index/<manifest>.json`` keeps what a scan read from each
of its runs (its tidy row and grid cell, or why it is corrupt) beside the identity of the files it read
(beside the run folders, not among them).

An entry is used only while its run's spec.yaml and summary.json are the very files it was read from
(inode, size, modification and change times: an edit, a rename over it or a copy changes at least one),
so the index can never say more than the folders do; everything else is read again and the index
rewritten. It is a cache: lost, stale, unreadable or unwritable (a read-only store), nothing but speed
is lost.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from repro.errors import StoreError
from repro.files import atomic

FOLDER = "index"
VERSION = 3  # bumped whenever what a scan keeps per run changes


def stamp(path: Path) -> list[int] | None:
    """The identity of the file at ``path`` as it is now (None: absent or unreadable)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def path(root: Path, manifest: str) -> Path:
    return root / FOLDER / f"{manifest}.json"


def load(root: Path, manifest: str) -> dict[str, Any]:
    """Run id -> entry of the manifest's index (empty when there is none, or it does not read)."""
    try:
        index = json.loads(path(root, manifest).read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(index, dict) or index.get("version") != VERSION or not isinstance(index.get("runs"), dict):
        return {}
    return index["runs"]


def save(root: Path, manifest: str, runs: dict[str, Any]) -> None:
    """Write the manifest's index atomically, or nothing where the store cannot be written."""
    with contextlib.suppress(StoreError, OSError):
        atomic.write_text(path(root, manifest), json.dumps({"version": VERSION, "runs": runs}, default=str))
