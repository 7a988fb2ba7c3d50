"""The prepared-data store on disk: where datasets live, the 90/5/5 split, meta.json.

Layout: ``<root>/<name>/{train,valid,test}.npy`` plus ``meta.json`` (vocabulary, counts, checksums of
sources and splits). A dataset directory appears only complete: preparation (under the dataset's
lock) writes into a temporary sibling directory, fsynced, renamed into place at the end, and removed if
anything fails; a killed preparation's leftovers go at the next one. A re-preparation killed between
its two renames leaves the dataset only as the previous copy (``.NAME.old-*``) and the complete new
one (``.NAME.building-*``): the next reader or preparation puts back the newest copy whose splits
match its meta.json (:func:`recover`) before anything is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from repro.data.errors import CorruptData
from repro.data.fetch import digest_file
from repro.files import atomic
from repro.files.locks import FileLock

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
    """The dataset's meta.json, or None if the directory holds no prepared dataset; CorruptData (naming
    the file) if it does not parse or lacks the vocabulary and splits."""
    path = directory / META
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        if directory.exists() or not leftovers(directory) or not recover(directory):
            return None
        return read_meta(directory)
    except (OSError, ValueError, RecursionError) as err:
        raise CorruptData(f"{path}: corrupt ({str(err).splitlines()[0][:200]})") from None
    if not (
        isinstance(meta, dict)
        and isinstance(meta.get("vocab"), dict)
        and isinstance(meta.get("splits"), dict)
        and all(isinstance(meta["splits"].get(s), dict) for s in SPLITS)
    ):
        raise CorruptData(f"{path}: corrupt (expected an object with vocab and splits {', '.join(SPLITS)})")
    return meta


def split_record(path: Path, array: np.ndarray) -> dict:
    """A written split's record for meta.json: shape, dtype and the sha256 of its .npy file."""
    return {"shape": list(array.shape), "dtype": str(array.dtype), "sha256": digest_file(path)}


def write_array(path: Path, array: np.ndarray, mode: int = 0o666) -> None:
    """Write one .npy file atomically (:mod:`repro.files.atomic`): a split, or a derived cache beside one
    (``mode``: no wider than the split it derives from)."""
    with atomic.replacing(path, mode=mode) as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)


def save_array(directory: Path, split: str, array: np.ndarray) -> dict:
    """Write ``<split>.npy``; returns its :func:`split_record`."""
    path = directory / f"{split}.npy"
    write_array(path, array)
    return split_record(path, array)


def load_array(directory: Path, split: str) -> np.ndarray:
    path = directory / f"{split}.npy"
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise CorruptData(f"{path}: corrupt ({str(err).splitlines()[0][:200]})") from None


def lock(target: Path) -> FileLock:
    """The lock of one dataset directory (preparation waits for it; see :func:`building`); its file
    goes with the preparation, so the data root holds only datasets."""
    return FileLock(target.parent / f".{target.name}.lock", wait=True, remove=True)


def leftovers(target: Path) -> list[Path]:
    """Copies of ``target`` that killed preparations left: complete new ones (``.building-*`` holding a
    meta.json, newest first), then previous ones (``.old-*/d``)."""
    if not target.parent.is_dir():
        return []
    found = sorted(target.parent.glob(f".{target.name}.building-*/{META}"), key=lambda p: -p.stat().st_mtime_ns)
    found += sorted(target.parent.glob(f".{target.name}.old-*/d/{META}"))
    return [p.parent for p in found if not p.parent.is_symlink()]


def recover(target: Path) -> bool:
    """Under ``target``'s lock: put back a good copy a killed re-preparation left (see the module
    docstring). True if ``target`` is in place afterwards."""
    with lock(target):
        return _recover(target)


def _recover(target: Path) -> bool:
    """:func:`recover` with the lock held."""
    if target.exists():
        return True
    for copy in leftovers(target):
        try:
            meta = read_meta(copy)
        except CorruptData:
            continue
        if all(
            (copy / f"{s}.npy").is_file() and digest_file(copy / f"{s}.npy") == meta["splits"][s].get("sha256")
            for s in SPLITS
        ):
            os.replace(copy, target)
            atomic.fsync_dir(target.parent)
            return True
    return False


@contextlib.contextmanager
def building(target: Path) -> Iterator[Path]:
    """Yield a fresh temporary directory; on success it replaces ``target``, on failure it is removed.
    Hold :func:`lock` around it: a good copy a killed re-preparation left is put back, then leftovers
    of killed preparations of ``target`` are removed."""
    _recover(target)
    atomic.clean_temps(target.parent, prefix=f".{target.name}.")
    tmp = atomic.temp_dir(target, "building")
    try:
        yield tmp
        try:
            atomic.fsync_dir(tmp)
            if target.exists():
                old = atomic.temp_dir(target, "old")
                os.replace(target, old / "d")
                os.replace(tmp, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, target)
            atomic.fsync_dir(target.parent)
        except OSError as err:
            raise atomic.store_error(target, err) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_meta(directory: Path, meta: dict) -> None:
    atomic.write_text(directory / META, json.dumps(meta, indent=1, sort_keys=True) + "\n")
