"""``repro bench attention``: time and peak memory of one attention layer per pattern x n x impl,
beside causal dense SDPA, with the speed-up and how much of the pattern's theoretical saving was realised.

Measurement: forward, and forward+backward with a gradient of ones on the output, on B x heads x n x dim
inputs that require grad. For each n the cases (dense SDPA first) are timed interleaved in one process
(:mod:`repro.bench.common`): ``speedup_vs_dense`` is the median over ``--repeats`` rounds of dense time
/ case time within a round; ``fwd_seconds`` and ``fwd_bwd_seconds`` are medians. On CPU also the
process's CPU seconds (``fwd_bwd_cpu_seconds``, ``cpu_speedup_vs_dense``): the work, steadier than
wall time when other jobs share the cores.

Peak memory: CUDA, ``torch.cuda.max_memory_allocated`` during one forward+backward minus the bytes
allocated before it (inputs excluded); CPU, a fresh process per case (``common``) that first runs the
case once at n = 4 l (libraries loaded, threads started), then measures one call: inputs, torch and the
interpreter excluded.

Theoretical ratio: allowed keys per query of causal dense over those of the pattern, averaged over the
n positions and heads (``repro.models.patterns.layer_keys``); ``realised_fraction`` is
(1 - 1/speedup) / (1 - 1/theoretical): the share of the pattern's FLOPs saving realised in time.
The CPU layouts' ceiling (``repro.models.kernels.ceiling``): ``allowed_keys_per_query``,
``computed_keys_per_query`` (the scores the blocked kernel's fused calls compute, per query; dense SDPA's
own for dense) and ``ceiling_vs_dense``, the speed-up at dense's cost per computed score.
"""

from __future__ import annotations

import argparse
import datetime
import os
from pathlib import Path

from repro.bench import common
from repro.errors import UserError
from repro.files import atomic
from repro.models import patterns as P

PROFILED = 3  # fwd+bwd per case under the profiler (``--profile``)
TOP_OPS = 12  # operators per case in its table, by self CPU time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=common.csv_of(int), default=[2048, 8192], help="sequence lengths, comma-separated")
    common.add_pattern_arguments(parser, ["merged", "multihead"], repeats=5)
    parser.add_argument(
        "--impls", type=common.csv_of(str), default=["auto"], help="auto,blocked,flex,masked (comma-separated)"
    )
    parser.add_argument("--heads", type=int, default=8, help="attention heads")
    parser.add_argument("--dim", type=int, default=64, help="head dimension")
    parser.add_argument("--batch", type=int, default=1, help="sequences per batch")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"], help="tensor dtype")
    parser.add_argument("--max-masked-n", type=int, default=4096, help="skip the n x n masked impl above this n")
    parser.add_argument(
        "--profile",
        default=None,
        metavar="PATH",
        help="also write PATH (markdown, CPU): per case, where one fwd+bwd's time goes (torch.profiler, by "
        "part and by op) beside the layout's ceiling",
    )


def theoretical_ratio(pattern: str, n: int, stride: int, c: int | None, heads: int, combine: str) -> float:
    return P.mean_keys("dense", n, stride) / P.layer_keys(pattern, combine, heads, n, stride, c)


def _name(case: dict) -> str:
    return f"{case['pattern']}/{case['impl']}"


def _inputs(setup: dict):
    import torch

    if setup.get("threads"):
        torch.set_num_threads(setup["threads"])
    dev = torch.device(setup["device"])
    B, H, n, d = setup["batch"], setup["heads"], setup["n"], setup["dim"]
    g = torch.Generator(device="cpu").manual_seed(0)
    return dev, [
        torch.randn(B, H, n, d, generator=g).to(dev, getattr(torch, setup["dtype"])).requires_grad_() for _ in range(3)
    ]


def _fns(setup: dict, case: dict, q, k, v):
    """(forward, forward+backward) callables of one case."""
    import torch
    import torch.nn.functional as F

    from repro.models.kernels import attend

    def fn():
        if case["impl"] == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return attend(
            q, k, v, case["pattern"], setup["stride"], setup["c"], combine=setup["combine"], impl=case["impl"]
        )

    def fwd():
        with torch.no_grad():
            fn()

    def fwd_bwd():
        o = fn()
        o.backward(torch.ones_like(o))
        q.grad = k.grad = v.grad = None

    return fwd, fwd_bwd


def _sync(dev):
    import torch

    return (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)


def _time(setup: dict, cases: list[dict]) -> dict:
    """Interleaved timing of every case in this process: {name: {"fwd": [...], "fwd_bwd": [...]} or {"error"}}."""
    dev, (q, k, v) = _inputs(setup)
    fns = {}
    for case in cases:
        fwd, fb = _fns(setup, case, q, k, v)
        fns[_name(case) + ":fwd_bwd"], fns[_name(case) + ":fwd"] = fb, fwd
    errors: dict[str, str] = {}
    cpu: dict[str, list[float]] = {}
    times = common.interleaved(fns, setup["repeats"], _sync(dev), errors, cpu)
    out = {}
    for case in cases:
        name = _name(case)
        err = errors.get(name + ":fwd_bwd") or errors.get(name + ":fwd")
        out[name] = (
            {"error": err}
            if err
            else {
                "fwd": times[name + ":fwd"],
                "fwd_bwd": times[name + ":fwd_bwd"],
                "fwd_bwd_cpu": cpu.get(name + ":fwd_bwd", []),
            }
        )
    return out


def _peak(setup: dict, case: dict) -> int:
    """Peak memory of one forward+backward above the inputs, in this process (fresh, on CPU)."""
    import torch

    from repro.train import memory

    dev, (q, k, v) = _inputs(setup)
    _, fb = _fns(setup, case, q, k, v)
    if dev.type == "cuda":
        fb()  # compile and build the block masks first
        torch.cuda.synchronize(dev)
    else:  # a first call on a short sequence loads libraries and starts threads outside the measurement
        _, small = _inputs({**setup, "n": min(setup["n"], 4 * setup["stride"])})
        _fns(setup, case, *small)[1]()
        del small
    with memory.measuring(dev) as peak:
        fb()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
    return int(peak.bytes)


def _profile(setup: dict, cases: list[dict]) -> dict:
    """Per case, :data:`PROFILED` fwd+bwd under torch.profiler after one untimed: the blocked kernel's
    parts (its ``blocked.<layout>.<way>`` ranges) and the top operators by self CPU time, as text."""
    from torch.profiler import ProfilerActivity, profile

    dev, (q, k, v) = _inputs(setup)
    out = {}
    for case in cases:
        _, fb = _fns(setup, case, q, k, v)
        fb()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(PROFILED):
                fb()
        ops = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in ops) or 1.0
        parts = sorted((e for e in ops if e.key.startswith("blocked.")), key=lambda e: e.key)
        out[_name(case)] = {
            "cpu_ms": total / 1e3 / PROFILED,
            "parts": [[e.key, e.cpu_time_total / 1e3 / PROFILED, e.cpu_time_total / total] for e in parts],
            "ops": ops.table(sort_by="self_cpu_time_total", row_limit=TOP_OPS, max_name_column_width=60),
        }
    return out


def _environment(setup: dict) -> dict:
    import torch

    dev = torch.device(setup["device"])
    return {
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "torch": torch.__version__,
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
    }


def _worker(payload: dict):
    setup = payload["setup"]
    if payload["what"] == "time":
        return {"times": _time(setup, payload["cases"]), "environment": _environment(setup)}
    if payload["what"] == "profile":
        return {"profiles": _profile(setup, payload["cases"])}
    return {"peak_memory_bytes": _peak(setup, payload["cases"][0])}


def _run(what: str, setup: dict, cases: list[dict], env: dict | None = None):
    payload = {"what": what, "setup": setup, "cases": cases}
    if setup["device"].startswith("cuda"):
        return _worker(payload)
    return common.run_worker("repro.bench.attention", payload, env)


def _setup(args, n: int) -> dict:
    return dict(
        n=n,
        stride=args.stride,
        c=args.c,
        combine=args.combine,
        device=args.device,
        heads=args.heads,
        dim=args.dim,
        batch=args.batch,
        dtype=args.dtype,
        repeats=args.repeats,
        threads=args.threads,
    )


def _cases(args, n: int) -> list[dict]:
    """Dense SDPA first, then every pattern x impl measured at ``n``."""
    import torch

    from repro.models.kernels import resolve_impl

    cases = [{"pattern": "dense", "impl": "sdpa"}]
    for pattern in args.patterns:
        for impl in args.impls:
            if (pattern == "dense" and impl != "masked") or (impl == "masked" and n > args.max_masked_n):
                continue
            case = {"pattern": pattern, "impl": resolve_impl(impl, torch.device(args.device))}
            if case not in cases:
                cases.append(case)
    return cases


def _records(args, n: int) -> list[dict]:
    from repro.models.kernels.ceiling import ceiling

    setup, cases = _setup(args, n), _cases(args, n)
    timed = _run("time", setup, cases)
    env = timed.get("environment", {})
    base = timed.get("times", {}).get("dense/sdpa", {"error": timed.get("error", "timing worker failed")})
    records = []
    for case in cases:
        t = timed.get("times", {}).get(_name(case), {"error": timed.get("error", "timing worker failed")})
        rec = {
            "pattern": case["pattern"],
            "n": n,
            "stride": args.stride,
            "c": args.c,
            "impl": case["impl"],
            **{k: v for k, v in setup.items() if k not in ("n", "stride", "c")},
            **env,
            "kernels": timed.get("kernels"),
            "timing": "interleaved",
        }
        if "error" in t:
            records.append({**rec, "error": t["error"]})
            continue
        mem = _run("memory", setup, [case], None if args.device.startswith("cuda") else common.memory_env())
        rec.update(
            fwd_seconds=common.median(t["fwd"]),
            fwd_bwd_seconds=common.median(t["fwd_bwd"]),
            peak_memory_bytes=mem.get("peak_memory_bytes"),
            rounds=len(t["fwd_bwd"]),
        )
        if "error" in mem:
            rec["memory_error"] = mem["error"]
        if "error" not in base:
            s = common.paired_speedup(base["fwd_bwd"], t["fwd_bwd"])
            r = (
                1.0
                if case["impl"] == "sdpa"
                else theoretical_ratio(case["pattern"], n, args.stride, args.c, args.heads, args.combine)
            )
            if not args.device.startswith("cuda"):
                rec.update(
                    fwd_bwd_cpu_seconds=common.median(t["fwd_bwd_cpu"]),
                    cpu_speedup_vs_dense=common.paired_speedup(base["fwd_bwd_cpu"], t["fwd_bwd_cpu"]),
                )
            if case["impl"] in ("sdpa", "blocked"):  # what the CPU layout computes (kernels/ceiling.py)
                found = ceiling(case["pattern"], n, args.stride, args.c, args.heads, args.combine)
                rec.update(
                    allowed_keys_per_query=found["allowed_keys"],
                    computed_keys_per_query=found["computed_keys"],
                    ceiling_vs_dense=found["ceiling_vs_dense"],
                )
            rec.update(
                speedup_vs_dense=s,
                fwd_speedup_vs_dense=common.paired_speedup(base["fwd"], t["fwd"]),
                theoretical_speedup=r,
                realised_fraction=(1 - 1 / s) / (1 - 1 / r) if r > 1 and s else None,
            )
        records.append(rec)
    dense_mem = records[0].get("peak_memory_bytes")
    for rec in records:
        if dense_mem and rec.get("peak_memory_bytes") is not None:
            rec["memory_vs_dense"] = rec["peak_memory_bytes"] / max(1, dense_mem)
    return records


FIRST = [
    "pattern",
    "n",
    "stride",
    "c",
    "impl",
    "fwd_seconds",
    "fwd_bwd_seconds",
    "peak_memory_bytes",
    "speedup_vs_dense",
    "fwd_speedup_vs_dense",
    "memory_vs_dense",
    "theoretical_speedup",
    "realised_fraction",
    "ceiling_vs_dense",
]


def _profile_section(args, n: int, records: list[dict]) -> list[str]:
    """The markdown of one n: each case's ceiling and measured speed-up, its parts and top operators."""
    prof = _run("profile", _setup(args, n), _cases(args, n))
    geometry = f"{args.batch} x {args.heads} heads x n {n} x dim {args.dim}, l = {args.stride}, c = {args.c}"
    lines = [f"## n = {n} ({geometry}, {args.combine}, {args.dtype})", ""]
    lines += [
        "| case | allowed keys / query | computed | ceiling vs dense | measured fwd+bwd vs dense | profiled CPU ms |"
    ]
    lines += ["|---|---|---|---|---|---|"]
    got = prof.get("profiles", {})
    for rec in records:
        name, p = _name(rec), got.get(_name(rec), {})
        cells = [rec.get(k) for k in ("allowed_keys_per_query", "computed_keys_per_query", "ceiling_vs_dense")]
        cells += [rec.get("speedup_vs_dense"), p.get("cpu_ms")]
        lines.append(f"| {name} | " + " | ".join("-" if x is None else f"{x:.4g}" for x in cells) + " |")
    if "error" in prof:
        return [*lines, "", f"profile failed: {prof['error']}", ""]
    for name, p in got.items():
        lines += ["", f"### {name}", ""]
        if p["parts"]:
            lines += ["| part (blocked.layout.way) | CPU ms per fwd+bwd | share of self CPU |", "|---|---|---|"]
            lines += [f"| {key} | {ms:.2f} | {share:.0%} |" for key, ms, share in p["parts"]]
            lines.append("")
        lines += ["```text", p["ops"].rstrip(), "```"]
    return [*lines, ""]


def _profile_head(args, records: list[dict]) -> list[str]:
    first = records[0] if records else {}
    command = (
        f"repro bench attention --n {','.join(map(str, args.n))} --patterns {','.join(args.patterns)} "
        f"--impls {','.join(args.impls)} --stride {args.stride} --c {args.c} --combine {args.combine} "
        f"--heads {args.heads} --dim {args.dim} --batch {args.batch} --dtype {args.dtype} "
        f"--repeats {args.repeats} --threads {args.threads} --profile {args.profile}"
    )
    return [
        "# Where one attention fwd+bwd goes, per layout",
        "",
        f"Written by `{command}` on {datetime.date.today()}: kernels {first.get('kernels')}, "
        f"{first.get('threads')} threads, torch {first.get('torch')}; the machine's 1-minute load average "
        f"{os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} CPUs. Ceiling: the speed-up over dense at "
        "dense's cost per computed score (repro/models/kernels/ceiling.py); measured: the paired median "
        f"of this run's timing rounds; profiled: {PROFILED} fwd+bwd under torch.profiler after one untimed "
        "(docs/kernels.md).",
        "",
    ]


def _profile_target(args) -> Path | None:
    """The ``--profile`` file, its folder checked before anything runs (CPU only)."""
    if args.profile is None:
        return None
    path = Path(args.profile)
    if args.device != "cpu":
        raise UserError(f"--profile {args.profile}: profiles the CPU kernels; got --device {args.device}")
    if not path.parent.is_dir():
        raise UserError(f"--profile {args.profile}: the folder {path.parent} does not exist")
    return path


def main(args: argparse.Namespace) -> list[dict]:
    profile_to = _profile_target(args)
    records, sections = [], []
    for n in args.n:
        found = _records(args, n)
        for rec in found:
            rec = {**{k: rec.get(k) for k in FIRST}, **{k: v for k, v in rec.items() if k not in FIRST}}
            records.append(rec)
            common.append_jsonl(args.jsonl, [rec])
        if profile_to:
            sections += _profile_section(args, n, found)
    if profile_to:
        atomic.write_text(profile_to, "\n".join(_profile_head(args, records) + sections))
    return records


if __name__ == "__main__":  # a worker's fresh process (``_run``); run the bench with `repro bench attention`
    common.worker_main(_worker)
