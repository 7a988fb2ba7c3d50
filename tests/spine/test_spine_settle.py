"""The store's settling of a run folder (repro/store/settle.py), without training: what it says to do, when
the data check runs, what it repairs and what it holds. The fault tests drive the same paths through real
processes (kills, locks, links); these name each answer."""

from __future__ import annotations

import os

import pytest
import torch
from spine_manifests import stored_run, tiny_manifest

from repro.config import manifest as manifests
from repro.store.checkpoints import LAST, RUN_ID
from repro.store.runs import RunDir
from repro.store.settle import settle


def _spec(tmp_path, name="t-tiny", **manifest):
    (tmp_path / "corpus.txt").write_text("a corpus the runs never read")
    path = tmp_path / f"{name}.yaml"
    path.write_text(tiny_manifest(tmp_path / "corpus.txt", name=name, **manifest))
    return manifests.load(path).expand("tiny")[0]


def _settle(run, spec, said, prepared="data"):
    calls = []

    def prepare():
        calls.append(RunDir(run.path.parent.parent.parent, spec.manifest, spec.run_id).path.exists())
        return prepared

    return settle(run, spec.record(None), prepare, said.append), calls


def test_a_new_run_starts_after_its_data_check_and_holds_the_lock(tmp_path):
    spec, said = _spec(tmp_path), []
    run = RunDir(tmp_path / "results", spec.manifest, spec.run_id)
    held, calls = _settle(run, spec, said)
    with held as got:
        assert (got.action, got.prepared, got.checkpoint, got.step) == ("start", "data", None, 0)
        assert calls == [False]  # the data was checked before the folder existed
        with run.lock() as other:
            assert not other.held
    with run.lock() as after:
        assert after.held


def test_a_finished_run_is_skipped_without_its_data(tmp_path):
    spec, said = _spec(tmp_path), []
    run = stored_run(tmp_path / "results", spec, test_bits=1.5)
    held, calls = _settle(run, spec, said)
    with held as got:
        assert got.action == "skipped" and got.summary["test_bits"] == 1.5 and not got.trains
    assert calls == []


def test_a_run_another_process_holds_is_busy(tmp_path):
    spec, said = _spec(tmp_path), []
    run = RunDir(tmp_path / "results", spec.manifest, spec.run_id)
    with run.lock() as mine:
        assert mine.held
        held, _ = _settle(run, spec, said)
        with held as got:
            assert got.action == "busy" and str(os.getpid()) in got.holder
    assert said == [f"  skipped: run {spec.run_id} is being trained by {got.holder}"]


def test_a_finished_twin_is_adopted_and_the_data_left_closed(tmp_path):
    root = tmp_path / "results"
    twin_spec, spec, said = _spec(tmp_path, "first"), _spec(tmp_path, "second"), []
    assert twin_spec.run_id == spec.run_id
    stored_run(root, twin_spec, valid_bits=2.5, test_bits=2.25)
    run = RunDir(root, spec.manifest, spec.run_id)
    held, calls = _settle(run, spec, said)
    with held as got:
        assert (
            got.action == "reused"
            and got.summary["reused_from"] == f"first/{spec.run_id}"
            and got.summary["test_bits"] == 2.25
        )
    assert calls == [] and run.finished and run.summary()["manifest"] == "second"


DAMAGES = {  # how a finished twin is damaged, and the end of the line that names it
    "bits as text": (
        lambda run: run.update_summary(valid_bits="NaN"),
        "summary.json: valid_bits is 'NaN', not a number",
    ),
    "no bits": (lambda run: _drop(run, "valid_bits", "test_bits"), "summary.json: no valid_bits"),
    "status only": (lambda run: run.write_summary({"status": "finished"}), "summary.json: no valid_bits"),
    "metrics deleted": (lambda run: run.metrics_path.unlink(), "metrics.csv: missing"),
    # never opened: a FIFO would hang the reuse's copy; the store's scan leaves such a run out
    "metrics a FIFO": (lambda run: _fifo(run.metrics_path), "metrics.csv is a FIFO, not a regular file"),
    "arrays a FIFO": (lambda run: _fifo(run.path / "analysis.npz"), "analysis.npz is a FIFO, not a regular file"),
    "healthy": (lambda run: None, None),
}


def _fifo(path):
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _drop(run, *keys):
    run.write_summary({k: v for k, v in run.summary().items() if k not in keys})


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("twin", ["same spec", "same computation"])
def test_a_damaged_finished_twin_is_named_and_passed_over_and_a_healthy_one_adopted(tmp_path, twin, damage):
    root, said = tmp_path / "results", []
    twin_spec = _spec(tmp_path, "first")
    spec = _spec(tmp_path, "second", **({"extra_eval": ", splits: [test]"} if twin == "same computation" else {}))
    assert (twin_spec.run_id == spec.run_id) == (twin == "same spec")
    source = stored_run(root, twin_spec, valid_bits=2.5, test_bits=2.25)
    harm, named = DAMAGES[damage]
    harm(source)
    run = RunDir(root, spec.manifest, spec.run_id)
    held, calls = _settle(run, spec, said)
    with held as got:
        if named is None:
            assert got.action == "reused" and got.summary["test_bits"] == 2.25 and calls == []
        else:
            assert got.action == "start" and calls == [False]  # to train: its data checked first
    if named is None:
        assert said == [f"  reused: first/{source.run_id} ({twin}), not retrained"]
    else:
        assert said == [f"  not reused: {source.path / named}"]


def test_a_corrupt_summary_and_temp_files_are_set_right_before_the_run_starts(tmp_path):
    spec, said = _spec(tmp_path), []
    run = RunDir(tmp_path / "results", spec.manifest, spec.run_id)
    run.path.mkdir(parents=True)
    (run.path / "summary.json").write_text("{half")
    (run.path / ".temp.ckpt").write_bytes(b"weights handed over")
    held, _ = _settle(run, spec, said)
    with held as got:
        assert got.action == "start"
        assert run.summary() == {} and not (run.path / ".temp.ckpt").exists()
    assert said[0] == "  removed 1 temporary file(s) a killed run left" and "corrupt" in said[1]


def test_a_run_with_a_checkpoint_resumes_from_it_with_its_metrics_cut_there(tmp_path):
    spec, said = _spec(tmp_path), []
    run = RunDir(tmp_path / "results", spec.manifest, spec.run_id)
    run.checkpoints.mkdir(parents=True)
    torch.save({"global_step": 10, RUN_ID: spec.run_id}, run.checkpoints / LAST)
    run.metrics_path.write_text("step,train/bits\n5,3.0\n10,2.9\n15,2.8\n")
    held, calls = _settle(run, spec, said)
    with held as got:
        assert (got.action, got.checkpoint, got.step, got.prepared) == ("resume", run.checkpoints / LAST, 10, "data")
    assert list(run.metrics()["step"]) == [5]
