"""Fixtures for the data tests: a temporary data root, pins for the small archives built in tests, and a
fake Debian archive (apt-get, apt-cache and dpkg-deb on PATH, run as real processes)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import sys
import tarfile
from pathlib import Path

import pytest

from repro.data import catalog
from repro.data.debian import Package, Release
from repro.data.fetch import Pin


def pin_of(data: bytes, algo: str = "sha256") -> Pin:
    return Pin(len(data), hashlib.new(algo, data).hexdigest(), algo)


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A fresh data root, also set as $REPRO_DATA so nothing touches the user's cache."""
    r = tmp_path / "data-root"
    monkeypatch.setenv("REPRO_DATA", str(r))
    return r


@pytest.fixture
def pin():
    return pin_of


@pytest.fixture
def releases(monkeypatch):
    """``releases(name, {version: {key: content}}, debs={version: deb bytes})`` replaces the known releases
    of a Debian-sourced dataset (newest first) by ones pinned to test content; returns the package."""

    def pin_releases(name: str, contents: dict[str, dict[str, bytes]], debs: dict[str, bytes] | None = None):
        ds = catalog.CATALOG[name]
        package = Package(
            ds.debian.name,
            ds.debian.root,
            tuple(
                Release(version, pin_of((debs or {}).get(version, b"")), {k: pin_of(c) for k, c in files.items()})
                for version, files in contents.items()
            ),
        )
        monkeypatch.setitem(catalog.CATALOG, name, dataclasses.replace(ds, debian=package))
        return package

    return pin_releases


FAKE_TOOL = r"""
import os, shutil, sys, tarfile
from pathlib import Path

base = Path(os.environ["FAKE_APT"])
tool, args = Path(sys.argv[0]).name, sys.argv[1:]
with open(base / "log", "a") as log:
    log.write(" ".join([tool, *args]) + "\n")


def listed():
    lists = base / "lists"
    return [line.split() for line in lists.read_text().splitlines()] if lists.exists() else []


if tool == "apt-cache" and args[0] == "madison":
    for name, version in listed():
        if name == args[1]:
            print(f" {name} | {version} | http://fake.invalid/debian bookworm/main all Packages")
elif tool == "apt-get" and args[0] == "update":
    if not (base / "fresh").exists():
        sys.exit("E: Could not open lock file /var/lib/apt/lists/lock - open (13: Permission denied)")
    shutil.copy(base / "fresh", base / "lists")
elif tool == "apt-get" and args[0] == "download":
    name, version = args[-1].split("=")
    deb = base / "pool" / f"{name}_{version}_all.deb"
    if [name, version] not in listed() or not deb.exists():
        sys.exit(f"E: Version '{version}' for '{name}' was not found")
    shutil.copy(deb, Path.cwd())
elif tool == "dpkg-deb" and args[0] == "-x":
    with tarfile.open(args[1]) as tar:
        tar.extractall(args[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
else:
    sys.exit(f"E: the fake {tool} does not do {args}")
"""


class FakeApt:
    """A Debian archive in a directory: package lists now (``lists``) and after ``apt-get update``
    (``fresh``; none: the update fails as it does without root), a pool of .debs (tars here), a log."""

    def __init__(self, base: Path):
        self.base = base
        (base / "bin").mkdir(parents=True)
        (base / "pool").mkdir()
        for tool in ("apt-get", "apt-cache", "dpkg-deb"):
            script = base / "bin" / tool
            script.write_text(f"#!{sys.executable}\n{FAKE_TOOL}")
            script.chmod(0o755)

    def publish(self, package: Package, version: str, files: dict[str, bytes]) -> bytes:
        """Put ``package`` ``version`` in the pool with ``files`` (relative to the package's root); its bytes."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for rel, data in files.items():
                info = tarfile.TarInfo(f"./{package.root}/{rel}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        (self.base / "pool" / f"{package.name}_{version}_all.deb").write_bytes(buf.getvalue())
        return buf.getvalue()

    def lists(self, name: str, *versions: str, fresh: tuple[str, ...] | None = None) -> None:
        """The versions of ``name`` the lists offer now, and after a refresh (None: refreshing fails)."""
        (self.base / "lists").write_text("".join(f"{name} {v}\n" for v in versions))
        if fresh is not None:
            (self.base / "fresh").write_text("".join(f"{name} {v}\n" for v in fresh))

    def calls(self) -> list[str]:
        log = self.base / "log"
        return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def apt(tmp_path, monkeypatch):
    fake = FakeApt(tmp_path / "apt")
    monkeypatch.setenv("FAKE_APT", str(fake.base))
    monkeypatch.setenv("PATH", f"{fake.base / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return fake
