"""Debian-sourced stand-ins: a pinned release fetched (not installed) from a fake archive, stale lists,
versions that are not pinned (refused, or prepared unverified and labelled), ``--from`` identified by content."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import zlib

import numpy as np
import pandas as pd
import pytest
import soundfile

import repro.data as data
from repro.cli import main
from repro.data import audio, catalog, images
from repro.data.errors import ChecksumMismatch, DataError
from repro.data.on_disk import read_meta
from repro.report.renderers import datasets as report_label

DEBIAN = ["linux-doc", "fashion-mnist", "moh-audio"]


def idx(n: int, version: str) -> bytes:
    pixels = (np.arange(n * 784) + zlib.crc32(version.encode())) % 256
    return np.array([2051, n, 28, 28], dtype=">u4").tobytes() + pixels.astype(np.uint8).tobytes()


def wav(version: str, name: str) -> bytes:
    t = np.arange(1_600) / 8_000
    buf = io.BytesIO()
    soundfile.write(
        buf,
        0.5 * np.sin(2 * np.pi * (200 + zlib.crc32(f"{version}{name}".encode()) % 400) * t),
        8_000,
        format="WAV",
        subtype="PCM_16",
    )
    return buf.getvalue()


def package_files(name: str, version: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """A fake release of ``name``'s package: its files (relative to the package's root) and the content
    its pins are taken of (by key)."""
    if name == "linux-doc":
        a, c = f"Kernel {version}\n======\n\nProse.\n".encode() * 5, b"Another manual\n--------------\n" * 5
        return {"a.rst": a, "b/c.rst.gz": gzip.compress(c), "translations/zh/a.rst": "内核".encode()}, {"rst": a + c}
    if name == "fashion-mnist":
        train, test = idx(20, version), idx(5, version)
        return (
            {"train-images-idx3-ubyte.gz": gzip.compress(train), "t10k-images-idx3-ubyte": test},
            dict(zip(images.FASHION_FILES, (train, test))),
        )
    wavs = {n: wav(version, n) for n in audio.MOH_FILES}
    return wavs, wavs


@pytest.fixture
def archive(apt, releases, monkeypatch):
    """``archive(name, pinned=[versions], other=[versions])`` publishes those releases of ``name``'s package
    in the fake archive, pins the ``pinned`` ones, and returns {version: content}."""
    monkeypatch.setattr(images, "FASHION_VALID", 4)

    def publish(name: str, pinned: list[str], other: list[str] = ()) -> dict[str, dict[str, bytes]]:
        package, contents, debs = catalog.get(name).debian, {}, {}
        for version in [*pinned, *other]:
            files, contents[version] = package_files(name, version)
            debs[version] = apt.publish(package, version, files)
        releases(name, {v: contents[v] for v in pinned}, debs)
        return contents

    return publish


def joined(name: str) -> bytes:
    return b"".join(data.open_split(name, s)[0].tobytes() for s in ("train", "valid", "test"))


@pytest.mark.parametrize("name", DEBIAN)
def test_the_pinned_version_is_fetched_and_unpacked_not_installed(root, apt, archive, name):
    contents = archive(name, pinned=["2.0-1"], other=["3.0-1"])
    package = catalog.get(name).debian
    apt.lists(package.name, "3.0-1", "2.0-1")
    data.prepare(name)
    meta = read_meta(root / name)
    assert meta["source"]["debian"] == package.name and meta["source"]["version"] == "2.0-1" and meta["verified"]
    assert data.provenance(name) == ("2.0-1", True)
    if name == "linux-doc":
        assert joined(name) == contents["2.0-1"]["rst"]  # the fetched release's manuals, English only
    assert apt.calls() == [
        f"apt-cache madison {package.name}",
        f"apt-get download -q {package.name}=2.0-1",
        apt.calls()[2],
    ] and apt.calls()[2].startswith("dpkg-deb -x ")  # no install, no update
    assert sorted(p.name for p in root.iterdir()) == [name]  # the unpacked package is gone


@pytest.mark.parametrize("refresh_works", [True, False])
def test_stale_lists_are_refreshed_before_an_older_pin_is_taken(root, apt, archive, refresh_works):
    archive("linux-doc", pinned=["2.0-1", "1.0-1"])
    apt.lists("linux-doc-6.1", "1.0-1", fresh=("2.0-1", "1.0-1") if refresh_works else None)
    data.prepare("linux-doc")
    assert "apt-get update -q" in apt.calls()
    assert data.provenance("linux-doc") == ("2.0-1" if refresh_works else "1.0-1", True)


@pytest.mark.parametrize("refresh_works", [True, False])
def test_only_other_versions_offered_is_refused_naming_them(root, apt, refresh_works):
    apt.lists("linux-doc-6.1", "6.1.200-1", fresh=("6.1.201-1", "6.1.200-1") if refresh_works else None)
    done = subprocess.run(
        [sys.executable, "-m", "repro", "data", "prepare", "linux-doc"], capture_output=True, text=True, env=os.environ
    )
    offered = "6.1.201-1, 6.1.200-1" if refresh_works else "6.1.200-1"
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1
    assert "linux-doc-6.1: no pinned version (6.1.192-3, " in done.stderr and f"archive offers {offered}" in done.stderr
    assert f"--allow-unverified to use {offered.split(',')[0]} (recorded as unverified)" in done.stderr
    assert ("refreshing the package lists failed: E: Could not open lock file" in done.stderr) != refresh_works
    assert not root.exists() or not any(root.rglob("*"))
    assert not any(c.startswith("apt-get download") for c in apt.calls())


def test_allow_unverified_takes_the_offered_version_and_names_it(root, apt, archive, capsys):
    contents = archive("linux-doc", pinned=["2.0-1"], other=["3.0-1"])
    apt.lists("linux-doc-6.1", "3.0-1", fresh=("3.0-1",))
    with pytest.raises(DataError, match=r"archive offers 3\.0-1; pass --allow-unverified to use 3\.0-1"):
        data.prepare("linux-doc")
    data.prepare("linux-doc", allow_unverified=True)
    assert joined("linux-doc") == contents["3.0-1"]["rst"]
    version, verified = data.provenance("linux-doc")
    assert (version, verified) == ("3.0-1", False)
    assert data.verify("linux-doc")[-1].endswith("linux-doc-6.1 3.0-1 (not a pinned version)")
    capsys.readouterr()
    assert main(["data", "info", "linux-doc"]) == 0
    info = capsys.readouterr().out
    assert "package      Debian linux-doc-6.1 3.0-1\n" in info and "verified     no: linux-doc-6.1 3.0-1" in info
    runs = pd.DataFrame(
        [
            {"dataset": "linux-doc", "dataset_version": version, "dataset_verified": verified},
            {"dataset": "wiki-lead", "dataset_version": None, "dataset_verified": True},
        ]
    )
    assert report_label(runs) == "linux-doc 3.0-1 (unverified), wiki-lead"  # what reports and figures state


def test_a_deb_that_differs_from_its_pin_is_refused(root, apt, archive, releases):
    contents = archive("moh-audio", pinned=["2.0-1"])
    releases("moh-audio", {"2.0-1": contents["2.0-1"]}, debs={"2.0-1": b"another build"})
    apt.lists("asterisk-moh-opsound-wav", "2.0-1")
    with pytest.raises(ChecksumMismatch, match=r"asterisk-moh-opsound-wav_2\.0-1_all\.deb: sha256 .*expected"):
        data.prepare("moh-audio")
    assert not any(root.rglob("*"))


def test_from_a_directory_is_identified_by_its_content(root, tmp_path, apt, releases):
    contents = {v: package_files("linux-doc", v) for v in ("2.0-1", "1.0-1")}
    releases("linux-doc", {v: c for v, (_, c) in contents.items()})
    docs = tmp_path / "Documentation"
    for rel, raw in contents["1.0-1"][0].items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_bytes(raw)
    data.prepare("linux-doc", src=docs)
    assert data.provenance("linux-doc") == ("1.0-1", True) and apt.calls() == []
    (docs / "a.rst").write_bytes(b"edited\n")
    with pytest.raises(ChecksumMismatch, match=r"expected a pinned release's \(2\.0-1: sha256 .*; 1\.0-1: sha256"):
        data.prepare("linux-doc", src=docs)
    assert data.provenance("linux-doc") == ("1.0-1", True)  # the prepared copy is untouched
    data.prepare("linux-doc", src=docs, allow_unverified=True)
    assert data.provenance("linux-doc") == (None, False)
