"""MFU and the machine's load in every run's summary (repro.train.throughput, docs/throughput.md)."""

from __future__ import annotations

import json

import pytest

from repro.cli import main
from repro.config import manifest as manifests
from repro.train import runner, throughput


def test_a_run_records_its_model_flops_rate_mfu_and_load(tmp_path, write_manifest, capsys):
    m = manifests.load(write_manifest())
    (spec,) = m.expand("tiny")
    summary = runner.run_spec(spec, m, tmp_path / "results").summary
    tokens = spec.train.batch_size * spec.data.block
    rate = 3 * summary["flops_per_token"] * tokens / summary["seconds_per_step"]
    assert summary["model_flops_per_second"] == pytest.approx(rate)
    assert summary["mfu"] == pytest.approx(rate / summary["peak_flops_per_second"])
    assert 0 < summary["mfu"] < 1 and summary["compute_dtype"] == "fp32"
    assert summary["flops_convention"] == throughput.CONVENTION
    assert summary["load_average_max"] >= summary["load_average_mean"] >= 0
    assert isinstance(summary["ran_alone"], bool) and summary["cpus"] >= 1
    cached = json.loads((tmp_path / "results" / "machine" / "peak-flops.json").read_text())
    ((key, entry),) = cached.items()  # measured once, for this processor, thread count and torch
    assert key in summary["peak_source"] and entry["flops_per_second"] == summary["peak_flops_per_second"]
    capsys.readouterr()
    assert main(["--results", str(tmp_path / "results"), "status"]) == 0
    assert "mfu" in capsys.readouterr().out.splitlines()[0]


def test_a_measured_peak_is_cached_per_machine(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(throughput, "measure_peak", lambda *a: calls.append(a) or 1e11)
    first = throughput.peak(tmp_path, "cpu", "32-true", threads=1)
    again = throughput.peak(tmp_path, "cpu", "32-true", threads=1)
    assert first == again and len(calls) == 1 and first["peak_flops_per_second"] == 1e11
    throughput.peak(tmp_path, "cpu", "bf16-mixed", threads=1)  # another dtype, another entry
    throughput.peak(tmp_path, "cpu", "32-true", threads=2)  # another thread count too
    assert len(calls) == 3
    assert throughput.peak(tmp_path, "cpu", "32-true", threads=1, remeasure=True) and len(calls) == 4


def test_the_gemm_measure_counts_two_flops_per_multiply_add():
    rate = throughput.measure_peak("cpu", "fp32", 1, size=256, repeats=2)
    assert 1e8 < rate < 1e13  # a real CPU's fp32 rate, whatever the load


def test_known_gpus_come_from_the_table():
    assert throughput.table_peak("NVIDIA H200", "bf16") == 989e12
    assert throughput.table_peak("NVIDIA H100 PCIe", "bf16") == 756e12
    assert throughput.table_peak("NVIDIA A100-SXM4-80GB", "tf32") == 156e12
    assert throughput.table_peak("Tesla V100-SXM2-16GB", "bf16") is None  # no bf16 units: measured instead
    assert throughput.table_peak("Some Future GPU", "bf16") is None


def test_precision_names_map_to_compute_dtypes():
    assert throughput.compute_dtype("bf16-mixed", "cpu") == "bf16"
    assert throughput.compute_dtype("16-mixed", "cuda") == "fp16"
    assert throughput.compute_dtype("32-true", "cpu") == "fp32"


def test_ran_alone_leaves_room_for_the_runs_own_threads_only():
    assert throughput.ran_alone(2.3, 2) is True
    assert throughput.ran_alone(3.9, 2) is False
    assert throughput.ran_alone(None, 2) is None
