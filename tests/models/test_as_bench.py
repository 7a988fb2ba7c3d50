"""``repro bench adaptive`` on a tiny configuration: the records' shape, the analytic ratios, and times that
agree with the same step timed directly."""

from __future__ import annotations

import argparse
import statistics
import time

import pytest
import torch

from repro.bench import adaptive
from repro.models.flops import flops_per_token


def _direct_seconds_per_step(case: dict, steps: int = 5) -> float:
    """The median wall time of ``steps`` training steps of ``case`` timed here, after two warm-ups, on the
    threads the bench's worker used."""
    before = torch.get_num_threads()
    torch.set_num_threads(case["threads"])
    try:
        _, step, _ = adaptive._setup(case)
        for _ in range(2):
            step()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)
    finally:
        torch.set_num_threads(before)


def test_bench_adaptive_records():
    parser = argparse.ArgumentParser()
    adaptive.add_arguments(parser)
    args = parser.parse_args(
        [
            "--span-limit",
            "512",
            "--spans",
            "0",
            "--layers",
            "1",
            "--d-model",
            "32",
            "--d-ff",
            "64",
            "--heads",
            "2",
            "--block",
            "32",
            "--batch",
            "2",
            "--steps",
            "1",
            "--warmup",
            "1",
            "--vocab",
            "16",
            "--dynamic",
        ]
    )
    records = adaptive.main(args)
    assert [r["kind"] for r in records] == ["fixed", "adaptive", "dynamic"]
    fixed, adapt, dynamic = records
    assert "error" not in fixed and "error" not in adapt, records
    for r in records:
        for key in ("kind", "span_limit", "span", "seconds_per_step", "peak_memory_bytes", "flops_per_token"):
            assert key in r
        assert r["span_limit"] == 512 and r["seconds_per_step"] > 0 and r["peak_memory_bytes"] > 0
    assert fixed["span"] is None and adapt["span"] == 0.0
    assert fixed["attention_window"] == 512 and fixed["cache_len"] == 511
    assert adapt["attention_window"] == 64 and adapt["cache_len"] == 127
    # What the bench is for: the adaptive row states its gains over the fixed row of the same run. Spans at
    # 0 attend over R (+ rounding to 64) of the 512 distances: the analytic FLOPs of the two spans, computed
    # here, say by how much
    kw = dict(layers=1, d_model=32, d_ff=64, heads=2, vocab_size=16)
    full, ramp = flops_per_token(**kw, spans=[[512.0, 512.0]]), flops_per_token(**kw, spans=[[32.0, 32.0]])
    assert (fixed["flops_per_token"], adapt["flops_per_token"]) == (pytest.approx(full), pytest.approx(ramp))
    assert adapt["flops_ratio_vs_fixed"] == pytest.approx(full / ramp) and full / ramp > 2
    # the times are seconds per training step of the case: each within 4x of this process timing the same step
    for rec in (fixed, adapt):
        assert 0.25 < rec["seconds_per_step"] / _direct_seconds_per_step(rec) < 4, rec
    # the dynamic row: its time beside the static case's, over the ratio of their FLOPs
    assert "error" not in dynamic, dynamic
    share = (dynamic["seconds_per_step"] / adapt["seconds_per_step"]) / (
        dynamic["flops_per_token"] / adapt["flops_per_token"]
    )
    assert dynamic["static_case_span"] == 0.0 and dynamic["time_over_flops_share"] == pytest.approx(share)
