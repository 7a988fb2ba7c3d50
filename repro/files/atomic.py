"""Durable, atomic files: a temp file in the same directory, fsynced, renamed over the target, the
directory fsynced; a failure removes the temp file and raises :class:`StoreError` naming the path.

Temp files are named ``.<name>.<random>.tmp`` (``clean_temps`` removes those a killed writer left).
Files and directories get the modes the umask gives (``mkstemp``/``mkdtemp`` alone would make them
private), so others on a shared machine can read a store when the umask lets them; ``mode`` narrows
that further (a copy of a private file stays private).

Nothing here follows a symbolic link where a file is written: a link planted at a store file's path
(pointing out of the store) is refused with one line naming it, never written through.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from repro.errors import StoreError

TEMP_SUFFIX = ".tmp"


def umask() -> int:
    """The process umask (read without changing it where /proc allows)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def os_error(err: BaseException) -> OSError | None:
    """The OSError behind ``err`` (torch wraps a failed write of a file object in a RuntimeError)."""
    while err is not None and not isinstance(err, OSError):
        err = err.__cause__ or err.__context__
    return err


def store_error(path: Path, err: OSError, action: str = "cannot write") -> StoreError:
    return StoreError(f"{path}: {action}: {err.strerror or err}")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_nofollow(path: Path, flags: int, action: str = "cannot open", mode: int = 0o666) -> int:
    """``os.open`` that never follows a symbolic link at ``path``: a link is refused (StoreError naming it)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise linked(path) from None
        raise store_error(path, err, action) from None


def linked(path: Path) -> StoreError:
    return StoreError(f"{path}: a symbolic link where a file of the store is expected; refused (remove the link)")


def refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise linked(path)


def make_dirs(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise store_error(path, err, "cannot create directory") from None


@contextlib.contextmanager
def replacing(path: Path, keep: Path | None = None, mode: int = 0o666) -> Iterator[BinaryIO]:
    """Write ``path`` through a temp file: yields the open temp file; on success it is fsynced and
    renamed over ``path`` (the old ``path``, if any, first renamed to ``keep``), and the directory fsynced.
    At every moment ``path`` or ``keep`` holds a complete file. Its mode: the umask's, within ``mode``."""
    make_dirs(path.parent)
    refuse_link(path)
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    except OSError as err:
        raise store_error(path, err) from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode & 0o666 & ~umask())
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if keep is not None and path.exists():
            os.replace(path, keep)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        cause = os_error(err)
        if cause is not None:
            raise store_error(path, cause) from None
        raise


def write_bytes(path: Path, data: bytes, mode: int = 0o666) -> None:
    with replacing(path, mode=mode) as fh:
        fh.write(data)


def write_text(path: Path, text: str, mode: int = 0o666) -> None:
    write_bytes(path, text.encode(), mode)


def temp_dir(target: Path, tag: str) -> Path:
    """A new directory ``.<target name>.<tag>-<random>`` beside ``target``, with the umask's mode."""
    make_dirs(target.parent)
    try:
        path = Path(tempfile.mkdtemp(prefix=f".{target.name}.{tag}-", dir=target.parent))
        os.chmod(path, 0o777 & ~umask())
    except OSError as err:
        raise store_error(target, err) from None
    return path


def clean_temps(directory: Path, prefix: str = ".") -> list[Path]:
    """Remove temp files (``.*.tmp``) and temp directories (``.<name>.<tag>-*``) that start with
    ``prefix`` in ``directory``: what a killed writer left. Call it only where no other writer can be
    active (under the lock of what the directory holds). Returns what was removed."""
    removed = []
    if not directory.is_dir():
        return removed
    for entry in directory.iterdir():
        if not entry.name.startswith(prefix):
            continue
        if entry.is_dir() and not entry.is_symlink() and any(f".{tag}-" in entry.name for tag in ("building", "old")):
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.name.endswith(TEMP_SUFFIX) and entry.is_file():
            entry.unlink(missing_ok=True)
        else:
            continue
        removed.append(entry)
    return removed
