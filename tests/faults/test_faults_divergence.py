"""Divergence, with real training: a non-finite loss or non-finite parameters stop training after that
step, the run is marked failed with what diverged, and the last good checkpoint stays; under DDP every
rank stops together even when only one rank's loss is not finite."""

from __future__ import annotations

import pytest
import torch
from faultkit import PoisonAt

from repro.config import manifest as manifests
from repro.store.runs import RunDir
from repro.train import runner


@pytest.mark.parametrize(
    "poisoned, error, kept",
    [
        (10, "parameters became non-finite at step 10", 5),  # found at the boundary after step 10
        (12, "loss became non-finite at step 12", 10),  # step 13's loss (global step 12) is NaN
    ],
)
def test_divergence_marks_failed_and_keeps_last_good_checkpoint(tmp_path, write_manifest, poisoned, error, kept):
    m = manifests.load(write_manifest())
    (spec,) = m.expand("tiny")
    lines = []
    outcome = runner.run_spec(spec, m, tmp_path / "results", callbacks=[PoisonAt(poisoned)], echo=lines.append)
    run = RunDir(tmp_path / "results", m.name, spec.run_id)
    assert outcome.status == "failed" and run.summary()["status"] == "failed"
    assert run.summary()["error"] == error and f"diverged: {error}" in lines[-1]
    ckpt = torch.load(run.last_checkpoint, weights_only=True)
    assert ckpt["global_step"] == kept  # nothing saved from the poisoned step on
    assert all(torch.isfinite(t).all() for t in ckpt["state_dict"].values())
    assert run.metrics()["step"].max() <= poisoned


def test_a_non_finite_loss_on_one_ddp_rank_stops_every_rank(tmp_path, write_manifest, kid):
    path = write_manifest()
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    code, out, err = kid(["run", str(path), "--devices", "2"], callbacks=[PoisonAt(12, rank=1)])
    assert code == 1, err[-3000:]
    run = RunDir(tmp_path / "results", m.name, spec.run_id)
    assert run.summary()["error"] == "loss became non-finite at step 12"  # rank 0's loss was finite
    assert "diverged: loss became non-finite at step 12" in out
    assert torch.load(run.last_checkpoint, weights_only=True)["global_step"] == 10
