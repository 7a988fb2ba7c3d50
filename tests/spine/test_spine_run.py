"""End to end: manifest -> training -> store -> report, skip, DDP, W&B (a resume after kill -9: tests/faults)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import torch

from repro.cli import main
from repro.config import manifest as manifests
from repro.data import open_split
from repro.store.runs import RunDir
from repro.train import runner

REQUIRED = {
    "status",
    "dataset",
    "scale",
    "valid_bits",
    "test_bits",
    "params",
    "steps",
    "seconds_per_step",
    "peak_memory_bytes",
    "wandb_run_id",
}


def only_run(path: Path):
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    return m, spec


def test_run_store_report_and_skip(capsys, tmp_path, write_manifest):
    path = write_manifest(
        claims="claims:\n  - {id: learns, text: learns, check: 'test_bits[] < 4.75'}\n"
        "  - {id: at-paper, text: x, check: 'test_bits[] < 1', scales: [paper]}\n"
    )
    assert main(["run", str(path)]) == 0
    m, spec = only_run(path)
    run = RunDir(tmp_path / "results", m.name, spec.run_id)
    summary = run.summary()
    assert set(summary) >= REQUIRED and summary["status"] == "finished"
    corpus = tmp_path / "corpus.txt"
    label = f"corpus.txt@{hashlib.sha256(corpus.read_bytes()).hexdigest()[:8]}"  # the corpus by name and content
    assert summary["dataset"] == label and summary["scale"] == "tiny" and summary["steps"] == 30
    assert summary["dataset_version"] is None and summary["dataset_verified"] is True
    test_split, _ = open_split("file", "test", path=str(tmp_path / "corpus.txt"), kind="text8")
    assert summary["test_targets"] == len(test_split) - 1  # the whole split: every token after the first
    assert 0 < summary["test_bits"] < math.log2(27) + 1
    metrics = run.metrics()
    assert list(metrics["step"]) == sorted(metrics["step"]) and metrics["step"].is_unique
    assert (run.path / "spec.yaml").exists() and run.last_checkpoint is not None

    capsys.readouterr()
    assert main(["run", str(path)]) == 0  # finished runs are skipped: one line says so, and what to do
    assert capsys.readouterr().out == (
        f"all 1 run(s) already finished under {tmp_path / 'results'}/: nothing to train (`repro report {path}` "
        "reports them; `--results DIR` trains them afresh into DIR)\n"
    )
    assert run.summary() == summary

    assert main(["report", str(path)]) == 0
    report = (tmp_path / "results" / "reports" / "t-tiny.md").read_text()
    assert "Scale: tiny" in report and f"dataset: {label}" in report
    if run.spec()["code_version"].endswith("+dirty"):  # tests run from a checkout with uncommitted changes
        assert "- **learns** — **not evaluable** — no seed is left: seed 0 dropped by its provenance" in report
    else:
        assert "- **learns** — **indicative (one seed)** — holds" in report and "**not evaluable**" not in report
    assert "**at-paper** —" not in report  # judged at the paper scale only (listed among the claims)
    assert (tmp_path / "results" / "reports" / "t-tiny.csv").exists()
    assert (tmp_path / "results" / "reports" / "figures" / "t-tiny-curves-tiny.png").exists()

    capsys.readouterr()
    assert main(["sample", spec.run_id[:6], "--n", "2", "--length", "12", "--prompt", "when in"]) == 0
    prompt = hashlib.sha256(b"when in").hexdigest()[:8]  # what decides the draw names its file (issue 49.5)
    drawn = run.path / "samples" / f"seed0-n2-len12-prompt{prompt}-temp1.txt"
    text = drawn.read_text().split("\n\n----\n\n")
    assert len(text) == 2 and all(t.startswith("when in") and len(t.strip("\n")) == 7 + 12 for t in text)
    assert main(["sample", spec.run_id[:6], "--n", "2", "--length", "5"]) == 0  # another draw: another file
    assert drawn.read_text().split("\n\n----\n\n") == text
    assert (run.path / "samples" / "seed0-n2-len5-temp1.txt").exists()


def test_a_spec_finished_under_another_manifest_is_reused_not_retrained(tmp_path, write_manifest, capsys):
    first = write_manifest()
    second = write_manifest(name="other.yaml", text=first.read_text().replace("name: t-tiny", "name: t-other"))
    assert main(["run", str(first)]) == 0
    assert main(["run", str(second)]) == 0
    _, spec = only_run(first)
    assert f"  reused: t-tiny/{spec.run_id} (same spec), not retrained" in capsys.readouterr().out
    a = RunDir(tmp_path / "results", "t-tiny", spec.run_id).summary()
    b = RunDir(tmp_path / "results", "t-other", spec.run_id).summary()
    assert (
        b["reused_from"] == f"t-tiny/{spec.run_id}" and b["manifest"] == "t-other" and b["test_bits"] == a["test_bits"]
    )
    assert (tmp_path / "results" / "runs" / "t-other" / spec.run_id / "checkpoints" / "last.ckpt").exists()


def test_peak_memory_is_the_runs_own(tmp_path, write_manifest):
    ballast = torch.ones(400_000_000, dtype=torch.float32)  # 1.6 GB resident before the run starts
    ballast.add_(1)
    del ballast
    m, spec = only_run(write_manifest())
    peak = runner.run_spec(spec, m, tmp_path / "results").summary["peak_memory_bytes"]
    assert 0 < peak < 1_400_000_000


def test_context_sweep_scores_the_test_split_at_each_minimum_context(tmp_path, write_manifest):
    path = write_manifest(extra_eval=", context_sweep: [0, 16, 24]")
    m, spec = only_run(path)
    summary = runner.run_spec(spec, m, tmp_path / "results").summary
    assert abs(summary["test_bits_ctx16"] - summary["test_bits"]) < 1e-9  # same procedure as the main score
    assert summary["test_bits_ctx24"] != summary["test_bits_ctx0"]


def test_ddp_on_two_cpu_processes(tmp_path, write_manifest):
    path = write_manifest()  # batch_size 4: two processes of 2 streams
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "run", str(path), "--devices", "2", "--no-wandb"],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    m, spec = only_run(path)
    summary = RunDir(tmp_path / "results", m.name, spec.run_id).summary()
    assert summary["status"] == "finished" and summary["steps"] == 30 and math.isfinite(summary["test_bits"])
    assert proc.stdout.count("step 30/30") == 1, proc.stdout  # rank 0's progress lines only


def test_wandb_offline_run_is_recorded(tmp_path, write_manifest, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    path = write_manifest()
    assert main(["run", str(path)]) == 0
    m, spec = only_run(path)
    run = RunDir(tmp_path / "results", m.name, spec.run_id)
    run_id = run.summary()["wandb_run_id"]
    assert run_id and list((tmp_path / "results" / "wandb").glob(f"offline-run-*-{run_id}"))
    config = json.dumps(spec.resolved(), sort_keys=True)
    assert "sparse_transformer" in config


SYNTHETIC = """name: t-probe
title: a probe
paper: probe
split: valid  # the probes' words read the valid split
base:
  data: {name: synthetic, block: 16, synthetic: {generator: periodic, distance: 8, symbols: 8, tokens: 20000}}
  model: {family: adaptive_span, layers: 1, d_model: 16, d_ff: 32, heads: 2, dropout: 0.0,
          span: {kind: fixed, limit: 16, ramp: 4}}
  train: {steps: 200, batch_size: 4, lr: 0.01, checkpoint_every: 200, log_every: 50}
  eval: {batch_size: 4}
scales:
  tiny: {}
claims:
  - {id: used, text: the source is used, check: "valid_bits.long[] < blind_bits.long[]", requires: ["used[long]"]}
"""


def test_a_synthetic_run_stores_bits_per_dependency_class_beside_floor_and_blind(tmp_path, capsys):
    path = tmp_path / "probe.yaml"
    path.write_text(SYNTHETIC)
    assert main(["run", str(path), "--results", str(tmp_path / "results")]) == 0
    m, spec = only_run(path)
    summary = RunDir(tmp_path / "results", m.name, spec.run_id).summary()
    assert summary["dataset"] == "synthetic periodic distance=8 seed=0" and summary["dataset_unit"] == "symbol"
    assert summary["floor_bits.long"] < summary["blind_bits.long"] == 3.0
    # 4 streams: each stream's first 7 targets have their source before the stream, scored apart
    assert summary["valid_targets.unseen"] == 4 * 7
    assert summary["valid_targets.long"] + summary["valid_targets.unseen"] == summary["valid_targets"]
    assert summary["valid_bits.long"] < 2.5  # 200 steps find a distance inside the span
    capsys.readouterr()
    assert main(["report", str(path), "--results", str(tmp_path / "results")]) == 0
    report = (tmp_path / "results" / "reports" / "t-probe.md").read_text()
    assert "`used[long]` | holds" in report
    if RunDir(tmp_path / "results", m.name, spec.run_id).spec()["code_version"].endswith("+dirty"):
        assert "- **used** — **not evaluable** — no seed is left: seed 0 dropped by its provenance" in report
    else:
        assert "- **used** — **indicative (one seed)** — holds" in report
