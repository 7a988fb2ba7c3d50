"""Exact resume: a run killed (kill -9) and rerun ends with an uninterrupted run's numbers (1e-4)."""

from __future__ import annotations

import signal

import numpy as np
import pandas as pd
import pytest
import torch
from faultkit import SignalAt

from repro.config import manifest as manifests
from repro.store.runs import RunDir
from repro.train import runner


def killed(tmp_path, write_manifest, kid, model: str, **faults):
    """A child's ``repro run`` of ``model`` with ``faults``; its exit code, the spec and the run."""
    path = write_manifest(model=model)
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    code, _, err = kid(["run", str(path)], **faults)
    return code, m, spec, RunDir(tmp_path / "results", m.name, spec.run_id)


def assert_same_run(resumed: dict, run: RunDir, straight: tuple[dict, pd.DataFrame]) -> None:
    summary, metrics = straight
    assert resumed["status"] == "finished"
    for key in ("valid_bits", "test_bits"):
        assert abs(resumed[key] - summary[key]) < 1e-4, (key, resumed[key], summary[key])
    ours = run.metrics()
    assert list(ours["step"]) == list(metrics["step"])  # no duplicate, no missing row
    assert (ours["train/bits"] - metrics["train/bits"]).abs().max() < 1e-4


@pytest.mark.parametrize("model", ["dense", "adaptive", "dynamic", "strided"])
def test_kill_9_mid_training_then_rerun_equals_an_uninterrupted_run(tmp_path, write_manifest, kid, straight, model):
    code, m, spec, run = killed(tmp_path, write_manifest, kid, model, callbacks=[SignalAt(12, signal.SIGKILL)])
    assert code == -signal.SIGKILL
    assert run.summary()["status"] == "running"
    state = torch.load(run.last_checkpoint, weights_only=True)
    assert state["global_step"] == 10
    if model == "adaptive":  # z' is clamped before the checkpoint is taken
        zs = torch.cat([v.flatten() for k, v in state["state_dict"].items() if k.endswith("z_prime")])
        assert zs.min() >= 0 and (zs == 0).any()  # the span loss pushed some below 0: clamped
    resumed = runner.run_spec(spec, m, tmp_path / "results", echo=lambda s: None)
    assert_same_run(resumed.summary, run, straight(model))


def test_kill_9_before_the_first_checkpoint_leaves_no_duplicate_rows(tmp_path, write_manifest, kid, straight):
    code, m, spec, run = killed(tmp_path, write_manifest, kid, "dense", callbacks=[SignalAt(3, signal.SIGKILL)])
    assert code == -signal.SIGKILL and run.last_checkpoint is None
    resumed = runner.run_spec(spec, m, tmp_path / "results", echo=lambda s: None)
    assert_same_run(resumed.summary, run, straight("dense"))


def test_kill_9_during_the_final_evaluation_keeps_the_training_measurements(tmp_path, write_manifest, kid, straight):
    code, m, spec, run = killed(tmp_path, write_manifest, kid, "dynamic", kill_in_eval=signal.SIGKILL)
    assert code == -signal.SIGKILL
    meter = torch.load(run.last_checkpoint, weights_only=True)["callbacks"]["TrainingMeter"]
    resumed = runner.run_spec(spec, m, tmp_path / "results", echo=lambda s: None).summary
    assert_same_run(resumed, run, straight("dynamic"))
    assert np.allclose(resumed["spans"], straight("dynamic")[0]["spans"], atol=1e-4)  # as of the last step
    assert resumed["peak_memory_bytes"] == meter["peak"] > 0
    assert resumed["seconds_per_step"] > 0 and resumed["train_seconds"] == pytest.approx(meter["seconds"], abs=0.01)
    assert meter["seconds"] > 0


def test_a_checkpoint_from_before_per_rank_state_still_resumes_exactly(tmp_path, write_manifest, kid, straight):
    code, m, spec, run = killed(tmp_path, write_manifest, kid, "adaptive", callbacks=[SignalAt(12, signal.SIGKILL)])
    assert code == -signal.SIGKILL
    state = torch.load(run.last_checkpoint, weights_only=True)
    (rank,) = state.pop("repro_ranks")  # as written before DDP runs kept every rank's state
    torch.save({**state, "repro_rng": rank["rng"], "repro_model_state": rank["state"]}, run.last_checkpoint)
    resumed = runner.run_spec(spec, m, tmp_path / "results", echo=lambda s: None)
    assert_same_run(resumed.summary, run, straight("adaptive"))
