"""`repro bench attention` produces the documented records (tiny sizes, CPU)."""

import argparse

import pytest

from repro.bench import attention as bench
from repro.errors import UserError
from repro.models.kernels import ceiling

N, HEADS = 512, 2
SCORES = HEADS * N * N * 4  # bytes of one (heads, n, n) float32 tensor: what the masked impl materialises


def test_st_bench_attention_records():
    """The records: the documented keys in order, the threads asked for, and peak memory that measures the
    case: the masked impl holds its n x n scores (and their softmax and gradients), the blocked kernel a
    fraction of that."""
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(
        [
            "--n",
            str(N),
            "--stride",
            "16",
            "--c",
            "4",
            "--patterns",
            "strided,fixed",
            "--impls",
            "blocked,masked",
            "--heads",
            str(HEADS),
            "--dim",
            "8",
            "--repeats",
            "1",
            "--threads",
            "1",
        ]
    )
    recs = bench.main(args)
    assert [(r["pattern"], r["impl"]) for r in recs] == [
        ("dense", "sdpa"),
        ("strided", "blocked"),
        ("strided", "masked"),
        ("fixed", "blocked"),
        ("fixed", "masked"),
    ]
    for r in recs:
        assert "error" not in r, r
        assert list(r)[: len(bench.FIRST)] == bench.FIRST  # the documented keys lead every record, in order
        assert (r["n"], r["stride"], r["c"]) == (N, 16, 4)
        assert r["fwd_seconds"] > 0 and r["rounds"] == 1 and r["timing"] == "interleaved"
        assert r["threads"] == 1  # the worker ran with the threads asked for, and says so
        assert r["fwd_bwd_cpu_seconds"] > 0 and r["cpu_speedup_vs_dense"] > 0
    for pattern in ("strided", "fixed"):
        blocked, masked = (
            next(r for r in recs if r["pattern"] == pattern and r["impl"] == i) for i in ("blocked", "masked")
        )
        assert SCORES <= masked["peak_memory_bytes"] <= 8 * SCORES, masked["peak_memory_bytes"]
        assert blocked["peak_memory_bytes"] < masked["peak_memory_bytes"] / 2
    assert recs[0]["speedup_vs_dense"] == 1.0 and recs[1]["theoretical_speedup"] > 1
    for r in (r for r in recs if r["impl"] in ("sdpa", "blocked")):  # each CPU layout's ceiling (not the n x n masked)
        assert r["computed_keys_per_query"] >= r["allowed_keys_per_query"] > 0 and r["kernels"].split()[0] == "native"
    assert recs[0]["ceiling_vs_dense"] == 1.0 < recs[1]["ceiling_vs_dense"]


def test_st_ceiling_counts_what_the_fused_calls_compute():
    """A causal call of at most 512 keys costs a full tile; longer ones skip whole key blocks; the
    blocked kernel's computed scores cover the allowed ones, in both residue paths."""
    assert ceiling.call_scores(64, 64, True) == 64 * 64 == ceiling.call_scores(64, 64, False)
    assert ceiling.call_scores(1024, 1024, True) == 256 * (512 * 2 + 1024 * 2)  # 4 query blocks of 256
    few = ceiling.ceiling("strided", 512, 32, None, 2)  # 16 blocks: residues by offsets
    many = ceiling.ceiling("strided", 8192, 128, None, 2)
    for found in (few, many):
        assert found["allowed_keys"] <= found["computed_keys"] < found["dense_computed_keys"]
    # the window computes l + l/2 keys per query, the residue tile its nb keys: 192 + 63 less the first block's
    assert 240 < many["computed_keys"] < 256 and 158 < many["allowed_keys"] < 159


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    return p.parse_args(list(argv))


def test_st_bench_attention_profile(tmp_path):
    """``--profile``: per case the ceiling and measured speed-up, where the blocked kernel's time went by
    part and by operator, and the command that wrote it; a folder that does not exist is refused first."""
    out = tmp_path / "profile.md"
    small = ["--n", "128", "--stride", "16", "--c", "4", "--patterns", "fixed", "--heads", "2", "--dim", "8"]
    recs = bench.main(_args(*small, "--repeats", "1", "--threads", "1", "--profile", str(out)))
    text = out.read_text()
    assert "repro bench attention --n 128 --patterns fixed" in text and "## n = 128" in text
    fixed = next(r for r in recs if r["pattern"] == "fixed")
    row = next(line for line in text.splitlines() if line.startswith("| fixed/blocked |"))
    assert row.split(" | ")[1:4] == [
        f"{fixed[k]:.4g}" for k in ("allowed_keys_per_query", "computed_keys_per_query", "ceiling_vs_dense")
    ]
    for part in ("blocked.own.forward", "blocked.own.backward", "blocked.earlier.forward", "blocked.earlier.backward"):
        assert f"| {part} |" in text
    assert text.count("aten::_scaled_dot_product_flash_attention_for_cpu") >= 2  # dense's table and fixed's
    with pytest.raises(UserError, match="does not exist"):
        bench.main(_args(*small, "--profile", str(tmp_path / "missing" / "p.md")))


def test_st_theoretical_ratio():
    r = bench.theoretical_ratio("strided", 8192, 128, None, 8, "merged")
    assert 25 < r < 26
    assert 7 < bench.theoretical_ratio("fixed", 8192, 128, 16, 8, "merged") < 7.5


def test_st_bench_step_records(monkeypatch):
    """`repro bench st-step` on a tiny model: one record per pattern, dense first, paired speed-ups and
    the FLOPs ratio from the models (workers run in-process here; the attention test above covers the
    subprocess protocol)."""
    from repro.bench import common, st_step

    monkeypatch.setattr(common, "run_worker", lambda module, payload, env=None: st_step._worker(payload))
    p = argparse.ArgumentParser()
    st_step.add_arguments(p)
    args = p.parse_args(
        [
            "--n",
            "128",
            "--stride",
            "16",
            "--c",
            "4",
            "--layers",
            "1",
            "--d-model",
            "16",
            "--heads",
            "2",
            "--repeats",
            "2",
            "--patterns",
            "fixed,strided",
            "--vocab",
            "8",
        ]
    )
    recs = st_step.main(args)
    assert [r["pattern"] for r in recs] == ["dense", "fixed", "strided"]
    for r in recs:
        assert "error" not in r, r
        assert r["seconds_per_step"] > 0 and r["rounds"] == 2 and r["speedup_vs_dense"] > 0
        assert isinstance(r["peak_memory_bytes"], int) and r["timing"] == "interleaved"
    assert recs[0]["speedup_vs_dense"] == 1.0 and recs[0]["flops_ratio_vs_dense"] == 1.0
    assert recs[1]["flops_ratio_vs_dense"] > 1 and recs[1]["attn_keys_per_query"] < recs[0]["attn_keys_per_query"]


def test_st_bench_interleaving_and_paired_speedup():
    from repro.bench import common

    order = []
    fns = {"a": lambda: order.append("a"), "b": lambda: order.append("b"), "bad": lambda: 1 / 0}
    errors, cpu = {}, {}
    times = common.interleaved(fns, 2, errors=errors, cpu=cpu)
    assert order == ["a", "b", "a", "b", "a", "b"]  # warm-up, then rounds in turn
    assert set(times) == {"a", "b"} and len(times["a"]) == 2 and "ZeroDivisionError" in errors["bad"]
    assert set(cpu) == {"a", "b"} and len(cpu["b"]) == 2
    assert common.paired_speedup([2.0, 4.0, 9.0], [1.0, 1.0, 3.0]) == 3.0
