"""Getting source files: resumable downloads and checks against pinned sizes and hashes.

A download goes to ``<dest>.part``; an interrupted one resumes with an HTTP Range request (or starts
over if the server ignores the range), and only a complete, verified file is renamed to ``dest``: a
partial or mismatching file never lies under the final name (one found there is deleted and fetched
again; one that ``--allow-unverified`` lets through is used as ``<dest>.unverified``, never trusted
later). The ``.part`` file is never written through a symbolic link. A file with no hash to check it
against (no pin) is trusted only as a download completed in this process: its size is the one the server
stated, the caller's check of its content passed, and one already under the final name is refused.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from repro.data.errors import ChecksumMismatch, DataError
from repro.errors import UserError
from repro.files import atomic

CHUNK = 1 << 20


@dataclass(frozen=True)
class Pin:
    """What a source file must be: its size in bytes and its hash (``algo`` is a hashlib name)."""

    size: int | None
    digest: str
    algo: str = "sha256"


def digest_bytes(data: bytes, algo: str = "sha256") -> str:
    return hashlib.new(algo, data).hexdigest()


def digest_file(path: Path, algo: str = "sha256") -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def matches(size: int, digest: str, pin: Pin) -> bool:
    return (pin.size is None or size == pin.size) and digest == pin.digest


def refuse_unless(problem: str, allow_unverified: bool) -> None:
    """Raise ChecksumMismatch for ``problem`` unless unverified sources are allowed."""
    if not allow_unverified:
        raise ChecksumMismatch(f"{problem} (refusing; pass --allow-unverified to use it anyway)")


def check(what: str, size: int, digest: str, pin: Pin, allow_unverified: bool) -> bool:
    """True if (size, digest) match the pin; a mismatch raises, or returns False when allowed.

    The error names both values so the user can tell a corrupt copy from a different release.
    """
    if matches(size, digest, pin):
        return True
    problem = f"{what}: {pin.algo} {digest}, expected {pin.digest}"
    if pin.size is not None and size != pin.size:
        problem += f"; size {size:,} bytes, expected {pin.size:,}"
    refuse_unless(problem, allow_unverified)
    return False


def check_file(path: Path, pin: Pin, allow_unverified: bool) -> bool:
    return check(str(path), path.stat().st_size, digest_file(path, pin.algo), pin, allow_unverified)


def check_bytes(what: str, data: bytes, pin: Pin, allow_unverified: bool) -> bool:
    return check(what, len(data), digest_bytes(data, pin.algo), pin, allow_unverified)


def download(
    url: str,
    dest: Path,
    pin: Pin | None,
    allow_unverified: bool = False,
    timeout: float = 60,
    complete: Callable[[Path], None] | None = None,
) -> Path:
    """Fetch ``url`` to ``dest`` (resuming ``dest.part``), verify it against ``pin``, rename into place.

    A ``dest`` that already exists and verifies is reused (one that does not is deleted). A completed
    download that fails verification is deleted before the error is raised, so the next attempt starts
    clean; allowed to be unverified, it is returned as ``<dest>.unverified``. ``pin`` None: a file with no
    published hash, downloaded whole (resumable); a ``dest`` already there is refused (nothing says it is
    whole), and the completed ``.part`` must have the size the server stated and pass ``complete`` (which
    raises to refuse it, the part then deleted, and may record its hash: the later downloads' pin) before
    it is renamed into place.
    """
    if pin is None and (dest.exists() or dest.is_symlink()):
        raise DataError(
            f"{dest}: already there, but no hash was recorded for it (one is recorded only for a download "
            f"completed here: this may be a partial download or a copy from elsewhere); not trusted: delete it "
            f"to download {url} again"
        )
    if dest.exists() or dest.is_symlink():
        if not dest.is_symlink() and dest.is_file() and check_file(dest, pin, allow_unverified=True):
            return dest
        dest.unlink()  # partial, foreign or a link: never trusted under the final name
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    if pin is not None and pin.size is not None and have > pin.size:
        part.unlink()
        have = 0
    if pin is None:
        _accept(url, part, _fetch(url, part, have, timeout), complete)
        os.replace(part, dest)
        return dest
    if pin.size is None or have < pin.size:
        _fetch(url, part, have, timeout)
    try:
        verified = check_file(part, pin, allow_unverified)
    except ChecksumMismatch:
        part.unlink()
        raise
    kept = dest if verified else dest.with_name(dest.name + ".unverified")
    os.replace(part, kept)
    return kept


def _accept(url: str, part: Path, size: int | None, complete: Callable[[Path], None] | None) -> None:
    """An unpinned download's whole ``part``: ``size`` bytes as the server stated (when it did), then
    ``complete``'s check; either failing deletes it (the next attempt starts clean)."""
    try:
        got = part.stat().st_size
        if size is not None and got != size:
            raise DataError(
                f"download of {url}: {got:,} bytes, but the server states {size:,}; deleted: rerun to download it"
            )
        if complete is not None:
            complete(part)
    except UserError:
        part.unlink()
        raise


def _fetch(url: str, part: Path, have: int, timeout: float) -> int | None:
    """Append the rest of ``url`` to ``part`` from byte ``have``; restart if the range is not honoured. The
    whole file's size as the server states it (Content-Length, or a resumed range's total), None if unstated."""
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            resumed = have and response.status == 206
            expected = response.headers.get("Content-Length")
            got = 0
            flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if resumed else os.O_TRUNC)
            with os.fdopen(atomic.open_nofollow(part, flags, "cannot write"), "wb") as f:
                while block := response.read(CHUNK):
                    f.write(block)
                    got += len(block)
            if expected is not None and got < int(expected):  # http.client ends short reads silently
                raise ConnectionError(f"connection closed after {got:,} of {int(expected):,} bytes")
            if resumed:
                return _total(response.headers.get("Content-Range"))
            return int(expected) if expected is not None else None
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # the range starts at the end: nothing left to fetch
            return _total(e.headers.get("Content-Range"))
        raise DataError(f"download of {url} failed: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        reason = getattr(e, "reason", e)
        raise DataError(
            f"download of {url} failed ({reason}); rerun to resume, or fetch it yourself and pass --from PATH"
        ) from None


def _total(content_range: str | None) -> int | None:
    """The whole size in a Content-Range header (``bytes 100-199/200``, ``bytes */200``); None if unstated."""
    total = (content_range or "").rpartition("/")[2].strip()
    return int(total) if total.isdigit() else None
