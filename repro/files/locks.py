"""Advisory file locks that the kernel releases when their holder dies (``flock``: a ``kill -9``
leaves no stale lock; on NFS, Linux maps it to a byte-range lock the server arbitrates).

The holder writes ``host pid started`` into the lock file, so whoever finds it taken can say who holds
it (a launcher can call :func:`holder` to ask without taking it). A lock file is never followed
through a symbolic link (``O_NOFOLLOW``): a link planted where it lies is refused, naming it.

``FileLock(path, directory=True)`` also locks the folder the file lies in: a lock file removed while
held (a cleanup script, a user) then leaves the lock held, and a second taker finds the folder taken.
Where the filesystem cannot lock a folder (NFS), the file's lock alone holds.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

from repro.files.atomic import make_dirs, open_nofollow, store_error

BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
UNSUPPORTED = (errno.ENOLCK, errno.EBADF, errno.EINVAL, errno.EOPNOTSUPP)


class FileLock:
    """``with FileLock(path, wait=False) as lock``: ``lock.held`` says whether we got it; if not,
    ``lock.holder`` is what the holder recorded. ``wait=True`` blocks until the lock is free;
    ``remove=True`` deletes the lock file on release (a waiter then retries on the new file);
    ``directory=True`` holds the folder's lock too (see the module docstring)."""

    def __init__(self, path: Path, wait: bool = False, remove: bool = False, directory: bool = False):
        self.path, self.wait, self.remove, self.directory = path, wait, remove, directory
        self.held, self.holder, self._fd, self._dir_fd = False, "", -1, -1

    def __enter__(self) -> FileLock:
        make_dirs(self.path.parent)
        while not self._acquire():
            pass
        return self

    def _acquire(self) -> bool:
        """One attempt; False when the file we locked was removed meanwhile (then try again)."""
        self._fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT, "cannot create lock file")
        if not self._flock(self._fd, self.path):
            self.holder = _read(self._fd) or "an unknown process"
            self._close()
            return True
        try:
            current = os.lstat(self.path).st_ino
        except FileNotFoundError:
            current = None
        if current != os.fstat(self._fd).st_ino:  # its holder removed it as we waited
            self._close()
            return False
        if self.directory and not self._lock_directory():
            self.holder = f"another process (its lock file {self.path} was removed while it held it)"
            self._close()
            return True
        self.held = True
        record = f"host {socket.gethostname()} pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n"
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, record.encode(), 0)
        except OSError:
            pass  # the lock holds without the record (a full disk): others then see "an unknown process"
        return True

    def _flock(self, fd: int, path: Path, unsupported: tuple[int, ...] = ()) -> bool:
        """Lock ``fd``: False when another process holds it; True when held (or its errno is in
        ``unsupported``: the filesystem cannot lock it)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except OSError as err:
            if err.errno in BUSY:
                return False
            if err.errno in unsupported:
                return True
            self._close()
            raise store_error(path, err, "cannot lock") from None
        return True

    def _lock_directory(self) -> bool:
        folder = self.path.parent
        try:
            self._dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as err:
            self._close()
            raise store_error(folder, err, "cannot open") from None
        return self._flock(self._dir_fd, folder, UNSUPPORTED)

    def _close(self) -> None:
        for fd in (self._fd, self._dir_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._dir_fd = -1

    def __exit__(self, *exc) -> None:
        if self._fd >= 0:
            if self.remove:
                self.path.unlink(missing_ok=True)
            self._close()  # releases the lock; a record left is read only while someone holds it
            self.held = False


def holder(path: Path) -> str | None:
    """Who holds the lock at ``path`` (their record), or None when nobody does."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, OSError):
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
