"""``repro bench adaptive`` on a tiny configuration: the records' shape, the analytic ratios, and times that
are the training step's and nothing else (read from a clock only the step advances, so no test here times
anything)."""

from __future__ import annotations

import argparse
import time

import pytest

from repro.bench import adaptive, common
from repro.models.flops import flops_per_token


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
    # the dynamic row: its time beside the static case's, over the ratio of their FLOPs
    assert "error" not in dynamic, dynamic
    share = (dynamic["seconds_per_step"] / adapt["seconds_per_step"]) / (
        dynamic["flops_per_token"] / adapt["flops_per_token"]
    )
    assert dynamic["static_case_span"] == 0.0 and dynamic["time_over_flops_share"] == pytest.approx(share)


def test_bench_adaptive_times_exactly_the_training_step(monkeypatch):
    """``seconds_per_step`` is the median over rounds of one training step of the case, and nothing around it
    (set-up, warm-ups, other cases): with a clock that only the steps advance (the fixed case 3 s a step, the
    adaptive 1 s), the records give those seconds back exactly, and the paired speed-up is their ratio. The
    workers run in-process here; ``test_bench_adaptive_records`` covers the subprocess protocol."""
    clock = [0.0]
    real_setup = adaptive._setup

    def setup(case):
        model, step, state = real_setup(case)
        cost = 3.0 if case["kind"] == "fixed" else 1.0

        def step_on_the_clock():
            step()
            clock[0] += cost

        return model, step_on_the_clock, state

    monkeypatch.setattr(adaptive, "_setup", setup)
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(common, "run_worker", lambda module, payload, env=None: adaptive._worker(payload))
    parser = argparse.ArgumentParser()
    adaptive.add_arguments(parser)
    tiny = "--span-limit 64 --spans 0 --layers 1 --d-model 16 --d-ff 32 --heads 2 --block 16 --batch 1 --vocab 8"
    records = adaptive.main(parser.parse_args([*tiny.split(), "--steps", "3", "--warmup", "2"]))
    fixed, adapt = records
    assert (fixed["seconds_per_step"], adapt["seconds_per_step"]) == (3.0, 1.0), records
    assert fixed["rounds"] == adapt["rounds"] == 3 and fixed["seconds_per_step_min"] == 3.0
    assert adapt["speedup_vs_fixed"] == 3.0 and fixed["first_step_seconds"] == 3.0
