#!/usr/bin/env python
"""The GPU check for the day one is lent (one H200, 15 minutes): in under 10 minutes, from the repo root,

    python scripts/gpu_check.py                  # on the GPU machine
    python scripts/gpu_check.py --dry-run        # on CPU at toy sizes (CI: tests/spine/test_gpu_check.py)

1. the environment (torch, CUDA, the device and its peak from repro.train.throughput's table);
2. a `small`-shaped training step of each family in bf16 with its MFU: `repro bench st-step` (12 x 512,
   8 heads, n = 8192, stride 64, dense vs fixed vs strided) and `repro bench adaptive` (the small scale's
   12 x 256, d_ff 1024, 8 heads, block 512, batch 64, S = 1024 as as-table3: fixed vs adaptive spans);
3. the kernel bench `repro bench attention` at n = 8192 and 16384 (bf16, 8 heads of 64, stride 128);
4. a 200-step bf16 run of each family at small widths on the offline corpus of the tiny scale
   (`repro run as-table3 --only kind=adaptive`, `repro run st-table2-enwik8 --only pattern=fixed`),
   whose summaries carry MFU and the load.

Each step is a subprocess with its own timeout; a failing step is recorded and the next one runs. Every
record is appended to ``<out>/gpu-check-<device>.jsonl`` as its step completes, tagged with the step,
the benches measure into a scratch results root (so committed results/bench/*.json stay as they are).
``--out`` defaults to results/bench (a dry run: a temporary directory, printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# the real sizes, then the dry run's toy sizes
SMALL_ST = ["--layers", "12", "--d-model", "512", "--heads", "8", "--stride", "64", "--c", "16"]
TOY_ST = ["--layers", "1", "--d-model", "32", "--heads", "2", "--stride", "16", "--c", "4"]
SMALL_AS = ["--layers", "12", "--d-model", "256", "--d-ff", "1024", "--heads", "8", "--block", "512"]
TOY_AS = ["--layers", "1", "--d-model", "32", "--d-ff", "64", "--heads", "2", "--block", "16"]
RUN_SMALL = {
    "adaptive_span": ["model.layers=12", "model.d_model=256", "model.d_ff=1024", "model.heads=8", "data.block=512"],
    "sparse_transformer": ["model.layers=12", "model.d_model=512", "model.heads=8", "data.block=1024"],
}
RUN_TOY = {
    "adaptive_span": ["model.layers=1", "model.d_model=32", "model.d_ff=64", "model.heads=2"],
    "sparse_transformer": ["model.layers=1", "model.d_model=32", "model.heads=2"],
}


def steps(dry: bool) -> list[tuple[str, list[str], int]]:
    """(name, repro arguments, timeout in seconds) of every step; a dry run allows 5 minutes a step (it
    checks that the script works, on whatever CPU runs the tests)."""
    found = _steps(dry)
    return [(name, cli, 300 if dry else timeout) for name, cli, timeout in found]


def _steps(dry: bool) -> list[tuple[str, list[str], int]]:
    dev = "cpu" if dry else "cuda"
    st, adaptive, runs = (TOY_ST, TOY_AS, RUN_TOY) if dry else (SMALL_ST, SMALL_AS, RUN_SMALL)
    n_step, n_kernel = (["64"], "64") if dry else (["8192"], "8192,16384")
    repeats = "1" if dry else "5"
    run_steps, precision = ("3", "32-true") if dry else ("200", "bf16-mixed")
    bench_precision = "32" if dry else "bf16"
    return [
        (
            "st-step",
            ["bench", "st-step", "--device", dev, "--precision", bench_precision, "--n", *n_step, *st]
            + ["--patterns", "fixed,strided", "--repeats", repeats, "--batch", "1"],
            120,
        ),
        (
            "adaptive-step",
            ["bench", "adaptive", "--device", dev, "--precision", bench_precision, *adaptive]
            + ["--span-limit", "64" if dry else "1024", "--spans", "0,512" if not dry else "0,32"]
            + ["--batch", "2" if dry else "64", "--steps", repeats, "--threads", "0"],
            120,
        ),
        (
            "attention",
            ["bench", "attention", "--device", dev, "--dtype", "float32" if dry else "bfloat16", "--n", n_kernel]
            + ["--stride", "16" if dry else "128", "--c", "4" if dry else "16", "--heads", "2" if dry else "8"]
            + ["--dim", "8" if dry else "64", "--patterns", "strided,fixed", "--repeats", repeats],
            150,
        ),
        (
            "run-adaptive-span",
            ["run", "as-table3", "--only", "kind=adaptive", "--seeds", "1", "--max-steps", run_steps, "--no-wandb"]
            + [f"train.precision={precision}", "train.val_every=0", *runs["adaptive_span"]],
            150,
        ),
        (
            "run-sparse-transformer",
            [
                "run",
                "st-table2-enwik8",
                "--only",
                "pattern=fixed",
                "--seeds",
                "1",
                "--max-steps",
                run_steps,
                "--no-wandb",
            ]
            + [f"train.precision={precision}", f"train.val_every={run_steps}", "train.val_tokens=4096"]
            + runs["sparse_transformer"],
            150,
        ),
    ]


def environment(dry: bool) -> dict:
    import torch

    from repro.train import throughput

    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "dry_run": dry, "cpus": os.cpu_count()}
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        env.update(
            device=name, peak_bf16=throughput.table_peak(name, "bf16"), peak_tf32=throughput.table_peak(name, "tf32")
        )
    else:
        env["device"] = "cpu"
    env["load_average"] = os.getloadavg()[0]
    return env


def records_of(name: str, scratch: Path) -> list[dict]:
    """What a finished step left: a bench's records, or the summaries of the runs it trained."""
    if name.startswith("run-"):
        return [json.loads(p.read_text()) for p in sorted((scratch / "runs").glob("*/*/summary.json"))]
    path = scratch / "bench" / f"{name.removesuffix('-step') if name == 'adaptive-step' else name}.json"
    return json.loads(path.read_text()) if path.exists() else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, toy sizes, a few steps: the script's own test")
    parser.add_argument("--out", default=None, help="where the JSONL of records goes (default results/bench)")
    args = parser.parse_args(argv)
    out = (
        Path(args.out)
        if args.out
        else (Path(tempfile.mkdtemp(prefix="gpu-check-")) if args.dry_run else ROOT / "results" / "bench")
    )
    out.mkdir(parents=True, exist_ok=True)
    env = environment(args.dry_run)
    target = out / f"gpu-check-{'dry-run' if args.dry_run else env['device'].split()[-1].lower()}.jsonl"
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

    def write(record: dict) -> None:
        with open(target, "a") as f:
            f.write(json.dumps(record) + "\n")

    write({"step": "environment", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **env})
    failed = 0
    for name, cli, timeout in steps(args.dry_run):
        scratch = Path(tempfile.mkdtemp(prefix=f"gpu-check-{name}-"))
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "repro", "--results", str(scratch), *cli],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, "PYTHONPATH": pythonpath},
            )
            status, tail = proc.returncode, (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            status, tail = "timeout", [f"killed after {timeout} s"]
        seconds = round(time.perf_counter() - started, 1)
        found = records_of(name, scratch)
        shutil.rmtree(scratch, ignore_errors=True)  # its records are kept below
        failed += status != 0 or not found
        write({"step": name, "status": status, "seconds": seconds, "command": "repro " + " ".join(cli), "tail": tail})
        for record in found:
            write({"step": name, **record})
        print(f"{name}: exit {status}, {len(found)} record(s), {seconds} s", flush=True)
    print(f"records in {target}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
