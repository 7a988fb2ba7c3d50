"""Reading members out of zip, tar and gzip files, turning every kind of corruption into a DataError."""

from __future__ import annotations

import contextlib
import gzip
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from repro.data.errors import DataError

CORRUPTION = (zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, gzip.BadGzipFile, KeyError, OSError)


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """Report a truncated, corrupt or incomplete archive at ``path`` as one DataError."""
    try:
        yield
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except CORRUPTION as e:
        raise DataError(f"{path}: corrupt, truncated or unexpected archive ({type(e).__name__}: {e})") from None


def looks_like_zip(path: Path) -> bool:
    """True for a zip by name or by its first bytes, complete or not (``zipfile.is_zipfile`` needs the
    central directory at the end, so it calls a truncated zip "not a zip")."""
    if path.suffix.lower() in (".zip", ".whl"):
        return True
    with reading(path), open(path, "rb") as f:
        return f.read(4) == b"PK\x03\x04"


def zip_member(path: Path, member: str) -> bytes:
    """The bytes of ``member`` in the zip at ``path`` (its CRC is checked by zipfile)."""
    with reading(path), zipfile.ZipFile(path) as z:
        return z.read(member)


def gunzip_or_read(path: Path) -> bytes:
    """The file's bytes, decompressed if it ends in ``.gz``."""
    with reading(path):
        return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def tar_members(path: Path, names: list[str]) -> dict[str, bytes]:
    """The bytes of the named members of a (compressed) tarball."""
    out: dict[str, bytes] = {}
    with reading(path), tarfile.open(path) as tar:
        for name in names:
            f = tar.extractfile(name)
            if f is None:
                raise DataError(f"{path}: member {name} is not a file")
            out[name] = f.read()
    return out
