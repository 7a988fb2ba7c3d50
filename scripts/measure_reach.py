"""The ratios of issue "Reach" on this machine: native kernels against the AVX2 pin, bf16 against fp32, the
sparse kernels and the adaptive span against their targets, and (with ``--before DIR``, a checkout of older
code) the code before against now. Take them on an IDLE machine (check ``uptime``; about 15 minutes on 2
cores), from the repository root:

    python scripts/measure_reach.py [--before /path/to/old/checkout] [--rounds 2]

Every figure comes from a ``repro bench`` (or a GEMM timing) in a fresh process per side, since the
libraries choose their kernels once per process; the sides of a figure run in turn, and the order flips
each round (A B C, then C B A), so a drift in the machine's speed falls on every side alike. A side's
figure is the median over rounds of each process's own median. Writes the records to
``results/bench/reach.json`` or ``--out`` (``--only``: the figures it measured replace theirs there, the
others stay) and prints the table in Markdown (``--md`` also writes it to a file).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from repro import cpu_isa

ROOT = Path(__file__).resolve().parents[1]


def words(*parts: str) -> list[str]:
    """Command-line words from readable strings (a bench's fixed arguments)."""
    return " ".join(parts).split(" ")


AS_TINY = words(
    "--layers 4 --d-model 64 --d-ff 256 --heads 4 --block 64 --batch 16 --span-limit 1024",
    "--spans 40,120 --dynamic --steps 10 --warmup 3 --threads 0",
)
AS_WIDE = words(
    "--layers 2 --d-model 256 --d-ff 1024 --heads 8 --block 256 --batch 4 --span-limit 2048",
    "--spans 200 --dynamic --steps 6 --warmup 2 --threads 0",
)


def st(layers: int, repeats: int, patterns: str, precision: str = "32") -> list[str]:
    """`repro bench st-step` at the cpu scale's shape (n 512, batch 8, 4 x 128, 4 heads of 32, l 32, c 8)."""
    return ["bench", "st-step"] + words(
        f"--n 512 --batch 8 --layers {layers} --d-model 128 --heads 4 --stride 32 --c 8",
        f"--repeats {repeats} --patterns {patterns} --precision {precision}",
    )


ATTN = words("--n 8192 --patterns strided,fixed --stride 128 --c 16 --heads 4 --dim 32 --batch 1 --repeats 5")
GEMM = """
import sys, time
from repro import cpu_isa
cpu_isa.apply(cpu_isa.choice(), "the GEMM timing")
import torch
dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[sys.argv[1]]
a, b = torch.randn(1024, 1024, dtype=dtype), torch.randn(1024, 1024, dtype=dtype)
times = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter(); a @ b; times.append(time.perf_counter() - t0)
print(2 * 1024**3 / min(times[1:]) / 1e9)
"""

# a side's instruction set; `before` (the older checkout) and `compiled` (--compile) run natively
SIDES = {"pinned": {"REPRO_CPU_ISA": "avx2"}, "native": {"REPRO_CPU_ISA": "native"}}


def figures(before: bool, compile_flag: bool) -> list[tuple[str, list[str], list[str]]]:
    """(figure, its command after `python -m repro` or `gemm DTYPE ROUNDS`, the sides it runs on)."""
    now = ["pinned", "native"]
    code = ["native", "before"] if before else ["native"]
    wide = [*code, "compiled"] if compile_flag else code
    return [
        ("gemm-fp32", ["gemm", "fp32", "6"], now),
        ("gemm-bf16", ["gemm", "bf16", "4"], now),
        ("st-step-fp32", st(4, 5, "fixed,strided"), [*now, *code[1:]]),
        ("st-step-bf16", st(4, 5, "fixed,strided", "bf16"), ["native"]),
        ("st-layer-fp32", st(1, 3, "fixed"), now),
        ("st-layer-bf16", st(1, 2, "fixed", "bf16"), now),
        ("adaptive-4x64", ["bench", "adaptive", *AS_TINY], [*now, *wide[1:]]),
        ("adaptive-4x64-bf16", ["bench", "adaptive", *AS_TINY, "--precision", "bf16"], ["native"]),
        ("adaptive-2x256", ["bench", "adaptive", *AS_WIDE], wide),
        ("attention-n8192", ["bench", "attention", *ATTN], [*now, *code[1:]]),
    ]


def run_side(cmd: list[str], side: str, before: str | None, scratch: Path) -> list[dict] | float:
    env = {k: v for k, v in os.environ.items() if k not in cpu_isa.AVX2}  # the side's REPRO_CPU_ISA decides
    env.update(SIDES.get(side, SIDES["native"]), OMP_WAIT_POLICY="PASSIVE")
    env["PYTHONPATH"] = before if side == "before" else str(ROOT)
    env["REPRO_PEAK_CACHE"] = str(scratch / "peak.json")  # one GEMM peak for every side's MFU
    if cmd[0] == "gemm":
        out = subprocess.run([sys.executable, "-c", GEMM, *cmd[1:]], env=env, capture_output=True, text=True)
        return float(out.stdout.strip().splitlines()[-1])
    path = scratch / f"{side}-{len(list(scratch.iterdir()))}.json"
    extra = ["--compile"] if side == "compiled" else []
    argv = [sys.executable, "-m", "repro", *cmd[:2], "--results", str(scratch), *cmd[2:], *extra, "--out", str(path)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd[:2])} ({side}) failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(path.read_text())


def case_of(record: dict) -> str:
    if "kind" in record:
        return record["kind"] if record.get("span") is None else f"{record['kind']} z={record['span']:g}"
    return f"{record['pattern']} ({record.get('impl', '')})"


def seconds(record: dict) -> float:
    return record.get("fwd_bwd_seconds") or record["seconds_per_step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="a checkout of the older code, run natively as the side `before`")
    parser.add_argument("--compile", action="store_true", help="add `repro bench adaptive --compile` as a side")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", help="comma-separated figure names")
    parser.add_argument("--md", help="also write the Markdown table here")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "reach.json"), help="the records' file")
    args = parser.parse_args()
    load = Path("/proc/loadavg").read_text().split()[0]
    rows, records = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cmd, sides in figures(bool(args.before), args.compile):
            if args.only and name not in args.only.split(","):
                continue
            got: dict[str, list] = {side: [] for side in sides}
            for r in range(args.rounds):
                for side in sides if r % 2 == 0 else sides[::-1]:
                    got[side].append(run_side(cmd, side, args.before, Path(tmp)))
            records[name] = got
            rows += table_rows(name, got)
    flags = sorted(set(Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split()))
    isa = " ".join(f for f in flags if f.startswith(("avx512", "amx", "avx2", "avx_vnni")))
    head = f"CPU flags: {isa}; load before: {load}; rounds: {args.rounds}\n\n"
    md = head + "| figure | case | " + " | ".join(("side", "value", "ratio")) + " |\n|---|---|---|---|---|\n"
    md += "\n".join(f"| {' | '.join(map(str, r))} |" for r in rows) + "\n"
    out = Path(args.out)
    if args.only and out.exists():  # a partial measurement replaces its own figures, keeps the others
        records = {**json.loads(out.read_text())["figures"], **records}
    out.write_text(json.dumps({"flags": isa, "load_before": load, "figures": records}, indent=1) + "\n")
    print(md)
    if args.md:
        Path(args.md).write_text(md)


def table_rows(name: str, got: dict[str, list]) -> list[tuple]:
    """Each side's median per case, with its ratio to the native side (time: native is faster when > 1)
    or, for a GEMM, the side's rate; MFU where the bench gives one; speed-up against its baseline case."""
    if name.startswith("gemm"):
        rate = {side: statistics.median(v) for side, v in got.items()}
        return [
            (name, "1024^3", side, f"{r:.1f} GFLOP/s", f"{r / rate['native']:.2f}x native") for side, r in rate.items()
        ]
    rows = []
    cases = [case_of(rec) for rec in got["native"][0]]
    for case in cases:
        recs_of = {side: [next(x for x in run if case_of(x) == case) for run in runs] for side, runs in got.items()}
        base = statistics.median(seconds(x) for x in recs_of["native"])
        for side, recs in recs_of.items():
            t = statistics.median(seconds(x) for x in recs)
            mfu = [x["mfu"] for x in recs if x.get("mfu")]
            speed = [x.get("speedup_vs_dense") or x.get("speedup_vs_fixed") for x in recs]
            extra = f"; MFU {100 * statistics.median(mfu):.1f}%" if mfu else ""
            extra += f"; x{statistics.median(speed):.2f} vs baseline" if all(speed) else ""
            rows.append((name, case, side, f"{t:.4f} s{extra}", f"{t / base:.2f}x native time"))
    return rows


if __name__ == "__main__":
    main()
