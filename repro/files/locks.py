"""Advisory file locks that the kernel releases when their holder dies (``flock``: a ``kill -9``
leaves no stale lock; on NFS, Linux maps it to a byte-range lock the server arbitrates).

The holder writes ``host pid started`` into the lock file, so whoever finds it taken can say who holds
it (a launcher can call :func:`holder` to ask without taking it).
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

from repro.files.atomic import make_dirs, store_error


class FileLock:
    """``with FileLock(path, wait=False) as lock``: ``lock.held`` says whether we got it; if not,
    ``lock.holder`` is what the holder recorded. ``wait=True`` blocks until the lock is free;
    ``remove=True`` deletes the lock file on release (a waiter then retries on the new file)."""

    def __init__(self, path: Path, wait: bool = False, remove: bool = False):
        self.path, self.wait, self.remove = path, wait, remove
        self.held, self.holder, self._fd = False, "", -1

    def __enter__(self) -> FileLock:
        make_dirs(self.path.parent)
        while not self._acquire():
            pass
        return self

    def _acquire(self) -> bool:
        """One attempt; False when the file we locked was removed meanwhile (then try again)."""
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as err:
            raise store_error(self.path, err, "cannot create lock file") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise store_error(self.path, err, "cannot lock") from None
            self.holder = _read(self._fd) or "an unknown process"
            os.close(self._fd)
            self._fd = -1
            return True
        try:
            current = os.stat(self.path).st_ino
        except FileNotFoundError:
            current = None
        if current != os.fstat(self._fd).st_ino:  # its holder removed it as we waited
            os.close(self._fd)
            return False
        self.held = True
        record = f"host {socket.gethostname()} pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n"
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, record.encode(), 0)
        except OSError:
            pass  # the lock holds without the record (a full disk): others then see "an unknown process"
        return True

    def __exit__(self, *exc) -> None:
        if self._fd >= 0:
            if self.remove:
                self.path.unlink(missing_ok=True)
            os.close(self._fd)  # releases the lock; a record left is read only while someone holds it
            self._fd, self.held = -1, False


def holder(path: Path) -> str | None:
    """Who holds the lock at ``path`` (their record), or None when nobody does."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _read(fd) or "an unknown process"
    finally:
        os.close(fd)
    return None


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        return ""
