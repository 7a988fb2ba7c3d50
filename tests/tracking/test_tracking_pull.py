"""`repro pull` against a local fake of the W&B API built from real offline runs (no network)."""

from __future__ import annotations

import numpy as np
from wandb_files import FakeApi, read_run

from repro.cli import main
from repro.config import manifest as manifests
from repro.report import stage as report
from repro.store.runs import RunDir
from repro.track.pull import pull


def offline_folders(store):
    return sorted((store.root / "wandb").glob("offline-run-*"))


def test_pull_writes_runs_trained_elsewhere_into_the_store(store, tmp_path):
    m = manifests.load(store.manifest)
    api = FakeApi(offline_folders(store))
    trained = [r for r in api.all if r.job_type == "adaptive_span"]
    stray = read_run(trained[0].folder)  # trained with another learning rate: not a run of the manifest
    stray.id, stray.config["train"]["lr"] = "stray", 0.5
    crashed = read_run(trained[0].folder)
    crashed.id, crashed.state = "crashed", "crashed"
    api.all += [stray, crashed]
    root = tmp_path / "results"
    lines = []

    done = pull(m, root, api, entity="me", project="elsewhere", echo=lines.append)
    assert api.calls == [("me/elsewhere", {"group": "t-track"})]
    assert sorted(done.written) == sorted(s.run_id for s in m.expand("tiny"))
    assert sorted(label.split()[0] for label, _ in done.left_out) == ["crashed", "stray"]
    assert any("stray" in line and "not one of the 2 runs of t-track" in line for line in lines)
    for spec in m.expand("tiny"):
        pulled, original = RunDir(root, m.name, spec.run_id), RunDir(store.root, m.name, spec.run_id)
        assert pulled.spec() == original.spec()
        summary = pulled.summary()
        assert summary.pop("pulled_from").startswith("me/elsewhere/")
        # the digest of the code it ran and the designs it was trained for are the store's records, not
        # W&B's: a pulled run's digest is computed from its commit when a verdict needs it (repro.store.digests)
        assert summary == {
            k: v for k, v in original.summary().items() if k not in ("digest", "digest_format", "designs")
        }
        ours, theirs = pulled.metrics(), original.metrics()
        assert list(ours["step"]) == list(theirs["step"])
        assert np.allclose(ours["train/bits"], theirs["train/bits"])
        assert np.allclose(ours["valid/bits_quick"].dropna(), theirs["valid/bits_quick"].dropna())
        assert "model/spans/layer1" in ours and "model/spans/1/1" not in ours  # W&B's view of the spans
        assert (pulled.path / "analysis.npz").read_bytes() == (original.path / "analysis.npz").read_bytes()
    assert not list(root.glob(".pull-*"))

    again = pull(m, root, api, echo=lines.append)
    assert again.written == [] and sorted(again.present) == sorted(done.written)

    _, judged = report.render(m, root)  # the report regenerates from the pulled runs alone
    _, at_home = report.render(m, store.root)
    assert [(c.id, c.verdict.status, c.verdict.detail) for c in judged] == [
        (c.id, c.verdict.status, c.verdict.detail) for c in at_home
    ]
    assert (root / "reports" / "figures" / "t-track-curves-tiny.png").exists()


def test_a_failed_download_leaves_nothing_behind(store, tmp_path):
    m = manifests.load(store.manifest)
    api = FakeApi(offline_folders(store))
    api.all = [r for r in api.all if r.job_type == "adaptive_span"][:1]

    def broken():
        raise ConnectionError("connection reset")

    api.all[0].scan_history = broken
    done = pull(m, tmp_path / "results", api, echo=lambda line: None)
    assert done.written == [] and "ConnectionError: connection reset" in done.left_out[0][1]
    assert not list((tmp_path / "results").rglob("spec.yaml")) and not list((tmp_path / "results").glob(".pull-*"))


def test_pull_without_a_login_is_one_line_and_status_2(store, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))  # no netrc, no W&B settings
    assert main(["pull", str(store.manifest)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: W&B API unavailable:") and len(err.splitlines()) == 1
