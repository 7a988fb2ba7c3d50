"""The prepared-data store on disk: where datasets live, the 90/5/5 split, atomic writes, meta.json.

Layout: ``<root>/<name>/{train,valid,test}.npy`` plus ``meta.json`` (vocabulary, counts, checksums of
sources and splits). A dataset directory appears only complete: preparation writes into a temporary
sibling directory that is renamed into place at the end, and removed if anything fails.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

from repro.data.fetch import digest_file

SPLITS = ("train", "valid", "test")
META = "meta.json"


def data_root(root=None) -> Path:
    """The data root: ``root`` if given, else ``$REPRO_DATA``, else ``~/.cache/repro/data``."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get("REPRO_DATA")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "repro" / "data"


def split_bounds(n: int) -> dict[str, tuple[int, int]]:
    """[start, end) of each split of n items: last 5% test, previous 5% valid, the rest train.

    For text8 and enwik8 (10^8 items) this is exactly 90M / 5M / 5M.
    """
    held = n // 20
    return {"train": (0, n - 2 * held), "valid": (n - 2 * held, n - held), "test": (n - held, n)}


def read_meta(directory: Path) -> dict | None:
    """The dataset's meta.json, or None if the directory holds no prepared dataset."""
    try:
        return json.loads((directory / META).read_text())
    except FileNotFoundError:
        return None


def split_record(path: Path, array: np.ndarray) -> dict:
    """A written split's record for meta.json: shape, dtype and the sha256 of its .npy file."""
    return {"shape": list(array.shape), "dtype": str(array.dtype), "sha256": digest_file(path)}


def save_array(directory: Path, split: str, array: np.ndarray) -> dict:
    """Write ``<split>.npy``; returns its :func:`split_record`."""
    path = directory / f"{split}.npy"
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return split_record(path, array)


def load_array(directory: Path, split: str) -> np.ndarray:
    return np.load(directory / f"{split}.npy", mmap_mode="r", allow_pickle=False)


@contextlib.contextmanager
def building(target: Path) -> Iterator[Path]:
    """Yield a fresh temporary directory; on success it replaces ``target``, on failure it is removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.replace(target, old / "d")
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_meta(directory: Path, meta: dict) -> None:
    (directory / META).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


def atomic_save_array(path: Path, array: np.ndarray) -> None:
    """Write one .npy next to prepared data (a derived cache) without ever exposing a partial file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, np.ascontiguousarray(array), allow_pickle=False)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
