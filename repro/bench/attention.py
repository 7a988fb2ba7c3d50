"""``repro bench attention``: time and peak memory of one attention layer per pattern x n x impl,
beside causal dense SDPA, with the speedup and how much of the pattern's theoretical saving was realised.

Measurement (forward, and forward+backward with a gradient of ones on the output), B x heads x n x dim
inputs that require grad; the median of ``--repeats`` timed runs after one warm-up run.

Peak memory:

* CUDA: ``torch.cuda.max_memory_allocated`` during one forward+backward, minus the bytes allocated
  before it (inputs excluded), in this process.
* CPU: there is no allocator high-water mark, so each case runs in a fresh subprocess
  (``python -m repro.bench.attention --worker``) and the peak is the process's peak resident set
  (``ru_maxrss``) after one forward+backward minus its resident set just before (inputs, torch and
  the interpreter excluded). Timings come from a worker with the default allocator; the memory
  figure from a second worker that runs with ``MALLOC_MMAP_THRESHOLD_=65536`` so every tensor
  of 64 KiB or more is its own mapping, returned on free: the peak resident set then follows the
  live tensors rather than glibc's heap high-water mark; pages count once written.

CPU workers run with ``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it: on a shared,
oversubscribed CPU the default spin-waiting OpenMP barriers make every parallel region cost a time
slice, which punishes kernels made of many mid-sized ops (the blocked ones) far more than one big op
(dense SDPA): 3.6 s instead of 0.55 s for strided at n=8192 on 2 busy cores.

Theoretical ratio: allowed keys per query of causal dense over those of the pattern, averaged over
the n positions (``repro.models.patterns.keys_per_query``); ``realised_fraction`` is
(1 - 1/speedup) / (1 - 1/theoretical): the share of the pattern's FLOPs saving realised in time.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

PATTERN_CHOICES = ("dense", "strided", "fixed", "local", "stride", "block", "summary")


def _csv_ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def _csv(s: str) -> list[str]:
    return [x for x in s.split(",") if x]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=_csv_ints, default=[2048, 8192], help="sequence lengths, comma-separated")
    parser.add_argument("--stride", type=int, default=128, help="l (block length / stride)")
    parser.add_argument("--c", type=int, default=16, help="summary positions per block (fixed)")
    parser.add_argument("--patterns", type=_csv, default=["strided", "fixed"],
                        help="comma-separated; causal dense SDPA is always measured as the baseline")
    parser.add_argument("--impls", type=_csv, default=["auto"], help="auto,blocked,flex,masked (comma-separated)")
    parser.add_argument("--combine", default="merged", choices=["merged", "multihead"],
                        help="how the two halves of a factorised pattern combine")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    parser.add_argument("--heads", type=int, default=8, help="attention heads")
    parser.add_argument("--dim", type=int, default=64, help="head dimension")
    parser.add_argument("--batch", type=int, default=1, help="sequences per batch")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="tensor dtype")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per case (the median is kept)")
    parser.add_argument("--jsonl", default=None, help="also append each record to this file as it completes")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--max-masked-n", type=int, default=4096, help="skip the n x n masked impl above this n")


def theoretical_ratio(pattern: str, n: int, stride: int, c: int | None, heads: int, combine: str) -> float:
    from repro.models import patterns as P

    per_head = P.head_patterns(pattern, combine, heads) if pattern in P.PATTERNS else [pattern] * heads
    keys = np.mean([P.mean_keys(p, n, stride, c, h) for p, h in zip(per_head, P.summary_heads(per_head))])
    return P.mean_keys("dense", n, stride) / keys


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _measure(case: dict) -> dict:
    """Run one case in this process; returns timings and peak memory."""
    import torch
    import torch.nn.functional as F

    from repro.models.kernels import attend, resolve_impl

    if case.get("threads"):
        torch.set_num_threads(case["threads"])
    dev = torch.device(case["device"])
    dtype = getattr(torch, case["dtype"])
    B, H, n, d = case["batch"], case["heads"], case["n"], case["dim"]
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(B, H, n, d, generator=g).to(dev, dtype).requires_grad_() for _ in range(3))
    if case["pattern"] == "dense" and case["impl"] == "sdpa":
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
        impl = "sdpa"
    else:
        impl = resolve_impl(case["impl"], dev)
        fn = lambda: attend(q, k, v, case["pattern"], case["stride"], case["c"], combine=case["combine"],  # noqa: E731
                            impl=impl)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def fwd_bwd():
        o = fn()
        o.backward(torch.ones_like(o))
        q.grad = k.grad = v.grad = None

    # warm-up run, which is also the memory measurement (on CPU, in a fresh process)
    if dev.type == "cuda":
        fwd_bwd()  # compile, build and cache the block masks first
        sync()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fwd_bwd()
        sync()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        base = _rss_bytes()
        fwd_bwd()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    times_f, times_fb = [], []
    for _ in range(case["repeats"]):
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            fn()
        sync()
        times_f.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fwd_bwd()
        sync()
        times_fb.append(time.perf_counter() - t0)
    return {**case, "impl": impl, "fwd_seconds": statistics.median(times_f) if times_f else None,
            "fwd_bwd_seconds": statistics.median(times_fb) if times_fb else None, "peak_memory_bytes": int(peak),
            "peak_memory_bytes_raw": int(peak),
            "threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}


def _worker(case: dict, env: dict | None = None) -> dict:
    env = dict(os.environ if env is None else env)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    proc = subprocess.run([sys.executable, "-m", "repro.bench.attention", "--worker", json.dumps(case)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {**case, "error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _run_case(case: dict) -> dict:
    if case["device"].startswith("cuda"):
        try:
            rec = _measure(case)
        except Exception as err:  # one failing case (e.g. out of memory) must not lose the others
            import torch

            torch.cuda.empty_cache()
            return {**case, "error": f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"}
        rec.pop("peak_memory_bytes_raw", None)
        return rec
    # CPU: timings in a plain worker; peak memory in a second one whose large allocations come straight
    # from mmap and go back on free, so its resident set tracks live tensors instead of glibc's heap
    # high-water mark and fragmentation
    rec = _worker(case)
    if "error" not in rec:
        mem = _worker({**case, "repeats": 0}, {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 16)})
        rec["peak_memory_bytes"] = mem.get("peak_memory_bytes")
        rec["peak_memory_bytes_default_malloc"] = rec.pop("peak_memory_bytes_raw", None)
    return rec


def _append(args, rec: dict) -> None:
    if getattr(args, "jsonl", None):
        with open(args.jsonl, "a") as f:
            f.write(json.dumps(rec) + "\n")


def main(args: argparse.Namespace) -> list[dict]:
    records = []
    for n in args.n:
        common = dict(n=n, stride=args.stride, c=args.c, combine=args.combine, device=args.device, heads=args.heads,
                      dim=args.dim, batch=args.batch, dtype=args.dtype, repeats=args.repeats,
                      threads=args.threads)
        dense = _run_case({**common, "pattern": "dense", "impl": "sdpa"})
        dense.update(speedup_vs_dense=1.0, theoretical_speedup=1.0, realised_fraction=None)
        records.append(dense)
        _append(args, dense)
        for pattern in args.patterns:
            for impl in args.impls:
                if pattern == "dense" and impl != "masked":
                    continue
                if impl == "masked" and n > args.max_masked_n:
                    continue
                rec = _run_case({**common, "pattern": pattern, "impl": impl})
                if "error" not in rec and "error" not in dense:
                    s = dense["fwd_bwd_seconds"] / rec["fwd_bwd_seconds"]
                    r = theoretical_ratio(pattern, n, args.stride, args.c, args.heads, args.combine)
                    rec.update(speedup_vs_dense=s, fwd_speedup_vs_dense=dense["fwd_seconds"] / rec["fwd_seconds"],
                               memory_vs_dense=rec["peak_memory_bytes"] / max(1, dense["peak_memory_bytes"]),
                               theoretical_speedup=r,
                               realised_fraction=(1 - 1 / s) / (1 - 1 / r) if r > 1 else None)
                records.append(rec)
                _append(args, rec)
    first = ["pattern", "n", "stride", "c", "impl", "fwd_seconds", "fwd_bwd_seconds", "peak_memory_bytes",
             "speedup_vs_dense", "fwd_speedup_vs_dense", "memory_vs_dense", "theoretical_speedup", "realised_fraction"]
    return [{**{k: r.get(k) for k in first}, **{k: v for k, v in r.items() if k not in first}} for r in records]


def format_table(records: list[dict]) -> str:
    cols = ["pattern", "n", "impl", "fwd_seconds", "fwd_bwd_seconds", "peak_memory_bytes", "speedup_vs_dense",
            "theoretical_speedup", "realised_fraction"]
    lines = ["  ".join(f"{c:>14}" for c in cols)]
    for r in records:
        cells = []
        for c in cols:
            x = r.get(c, r.get("error", "") if c == "fwd_seconds" else "")
            if c == "peak_memory_bytes" and isinstance(x, int):
                x = f"{x / 2**20:.1f}MiB"
            elif isinstance(x, float):
                x = f"{x:.3f}"
            cells.append(f"{str(x):>14}")
        lines.append("  ".join(cells))
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(_measure(json.loads(sys.argv[2]))))
    else:  # standalone use: python -m repro.bench.attention [--json] ...
        p = argparse.ArgumentParser(prog="repro bench attention")
        add_arguments(p)
        p.add_argument("--json", action="store_true", help="print the records as JSON")
        a = p.parse_args()
        recs = main(a)
        print(json.dumps(recs, indent=1) if a.json else format_table(recs))
