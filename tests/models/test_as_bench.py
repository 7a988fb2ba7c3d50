"""``repro bench adaptive`` on a tiny configuration: the records' shape and the analytic ratios."""
from __future__ import annotations

import argparse

from repro.bench import adaptive


def test_bench_adaptive_records():
    parser = argparse.ArgumentParser()
    adaptive.add_arguments(parser)
    args = parser.parse_args(["--span-limit", "512", "--spans", "0", "--layers", "1", "--d-model", "32",
                              "--d-ff", "64", "--heads", "2", "--block", "32", "--batch", "2",
                              "--steps", "1", "--warmup", "1", "--vocab", "16"])
    records = adaptive.main(args)
    assert [r["kind"] for r in records] == ["fixed", "adaptive"]
    fixed, adapt = records
    assert "error" not in fixed and "error" not in adapt, records
    for r in records:
        for key in ("kind", "span_limit", "span", "seconds_per_step", "peak_memory_bytes", "flops_per_token"):
            assert key in r
        assert r["span_limit"] == 512 and r["seconds_per_step"] > 0 and r["peak_memory_bytes"] > 0
    assert fixed["span"] is None and adapt["span"] == 0.0
    assert fixed["attention_window"] == 512 and fixed["cache_len"] == 511
    assert adapt["attention_window"] == 64 and adapt["cache_len"] == 127
    assert adapt["flops_ratio_vs_fixed"] > 2
    assert adapt["speedup_vs_fixed"] > 0 and adapt["memory_ratio_vs_fixed"] > 0
