"""Debian packages that carry the offline stand-in corpora: known releases, fetched without installing.

A dataset's package is pinned by version *and* content: each known :class:`Release` has the .deb's
size and sha256 and the pins of the files the dataset reads. :func:`fetch` asks the package lists
which versions the archive offers (``apt-cache madison``), refreshes them (``apt-get update``) when
the newest known release is not among them, downloads the first known release offered with
``apt-get download NAME=VERSION`` into a temporary directory and unpacks it with ``dpkg-deb -x``.
Nothing is installed or removed, and no root is needed where ``apt-get download`` works.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from repro.data.errors import DataError
from repro.data.fetch import Pin, check_file


@dataclass(frozen=True)
class Release:
    """One known version of a package: its .deb and the sha256 pins of the dataset's files (by key)."""

    version: str
    deb: Pin
    content: Mapping[str, Pin]


@dataclass(frozen=True)
class Package:
    """A Debian package holding a dataset under ``root`` (a path inside the package, no leading slash).

    ``releases`` are newest first; the first one is fetched whenever the archive offers it.
    """

    name: str
    root: str
    releases: tuple[Release, ...]


@dataclass(frozen=True)
class Fetched:
    """An unpacked package: where the dataset's files are, the version, what could not be verified."""

    path: Path
    version: str
    release: Release | None
    unverified: tuple[str, ...]


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise DataError(
            f"`{cmd[0]}` not found: fetching Debian packages needs apt (Debian/Ubuntu); "
            f"elsewhere pass --from DIR holding a pinned release's files"
        ) from None


def _last_line(done: subprocess.CompletedProcess) -> str:
    """Why a command failed: its last error line (apt's warnings skipped), else its last line of output."""
    for text in (done.stderr, done.stdout):
        lines = [ln for ln in text.strip().splitlines() if not ln.startswith("W:")]
        if lines:
            return lines[-1]
    return f"exit status {done.returncode}"


def offered(name: str) -> list[str]:
    """The versions of ``name`` in the package lists, as ``apt-cache madison`` orders them (newest first)."""
    done = _run(["apt-cache", "madison", name])
    if done.returncode != 0:
        raise DataError(f"`apt-cache madison {name}` failed ({_last_line(done)})")
    versions = []
    for line in done.stdout.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) == 3 and fields[0] == name and fields[2].endswith("Packages") and fields[1] not in versions:
            versions.append(fields[1])
    return versions


def refresh() -> str | None:
    """Refresh the package lists (``apt-get update``); None on success, else why it failed."""
    done = _run(["apt-get", "update", "-q"])
    return None if done.returncode == 0 else _last_line(done)


def choose(package: Package, allow_unverified: bool) -> tuple[str, Release | None]:
    """The version to fetch and its known release (None: not a pinned version, only with ``allow_unverified``).

    Refreshes the lists first when the newest known release is not in them. With no known release
    offered, refuses with the versions the archive has and the ``--allow-unverified`` route.
    """
    versions, failed = offered(package.name), None
    if package.releases[0].version not in versions:
        failed = refresh()
        versions = offered(package.name)
    release = next((r for r in package.releases if r.version in versions), None)
    if release is not None:
        return release.version, release
    if allow_unverified and versions:
        return versions[0], None
    pinned = ", ".join(r.version for r in package.releases)
    has = f"offers {', '.join(versions)}" if versions else "offers no version of it"
    note = f" (refreshing the package lists failed: {failed})" if failed else ""
    route = f"pass --allow-unverified to use {versions[0]} (recorded as unverified), or " if versions else ""
    raise DataError(
        f"{package.name}: no pinned version ({pinned}) can be had; the package archive {has}{note}; "
        f"{route}pass --from DIR holding a pinned release's /{package.root}"
    )


def download(name: str, version: str, dest: Path) -> Path:
    """``apt-get download NAME=VERSION`` into the empty directory ``dest``; returns the .deb."""
    done = _run(["apt-get", "download", "-q", f"{name}={version}"], cwd=dest)
    debs = sorted(dest.glob("*.deb"))
    if done.returncode != 0 or len(debs) != 1:
        raise DataError(
            f"`apt-get download {name}={version}` failed ({_last_line(done)}); "
            f"rerun, or pass --from DIR holding a pinned release's files"
        )
    return debs[0]


def unpack(deb: Path, dest: Path) -> Path:
    """``dpkg-deb -x``: the package's files under ``dest``, nothing installed."""
    done = _run(["dpkg-deb", "-x", str(deb), str(dest)])
    if done.returncode != 0:
        raise DataError(f"`dpkg-deb -x {deb.name}` failed ({_last_line(done)})")
    return dest


def fetch(package: Package, work: Path, allow_unverified: bool) -> Fetched:
    """Download and unpack the version :func:`choose` picks into the empty directory ``work``."""
    version, release = choose(package, allow_unverified)
    (work / "deb").mkdir()
    deb = download(package.name, version, work / "deb")
    if release is None:
        unverified = (f"{package.name} {version} (not a pinned version)",)
    else:
        unverified = () if check_file(deb, release.deb, allow_unverified) else (str(deb.name),)
    path = unpack(deb, work / "root") / package.root
    if not path.is_dir():
        raise DataError(f"{package.name} {version} has no /{package.root}")
    return Fetched(path, version, release, unverified)
