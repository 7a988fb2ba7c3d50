"""`repro bench attention` produces the documented records (tiny sizes, CPU)."""
import argparse

from repro.bench import attention as bench


def test_st_bench_attention_records():
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--n", "256", "--stride", "16", "--c", "4", "--patterns", "strided,fixed",
                         "--impls", "blocked", "--heads", "2", "--dim", "8", "--repeats", "1"])
    recs = bench.main(args)
    assert [(r["pattern"], r["impl"]) for r in recs] == [("dense", "sdpa"), ("strided", "blocked"), ("fixed", "blocked")]
    for r in recs:
        assert "error" not in r, r
        for key in ("pattern", "n", "stride", "c", "impl", "fwd_seconds", "fwd_bwd_seconds", "peak_memory_bytes",
                    "speedup_vs_dense"):
            assert key in r
        assert r["fwd_seconds"] > 0 and r["peak_memory_bytes"] >= 0
    assert recs[1]["theoretical_speedup"] > 1
    assert "strided" in bench.format_table(recs)


def test_st_theoretical_ratio():
    r = bench.theoretical_ratio("strided", 8192, 128, None, 8, "merged")
    assert 25 < r < 26
    assert 7 < bench.theoretical_ratio("fixed", 8192, 128, 16, 8, "merged") < 7.5
