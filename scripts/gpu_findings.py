#!/usr/bin/env python
"""The findings campaign for the day a GPU is lent (one H200, at most 10 minutes of it), from the repo root:

    REPRO_DATA=DIR python scripts/gpu_findings.py --results OUT   # on the GPU machine
    python scripts/gpu_findings.py --dry-run                       # on CPU at toy sizes (CI: tests/spine/test_gpu_findings.py)

It trains, as stored runs of the `gpu10` scale (experiments/shared/adaptive-span-gpu10.yaml: the small
shape's width, bf16, the cpu scale's linux-doc bytes, sized not to overfit them), only the cells that
decide what 2 CPU cores cannot:

(a) does a fixed span improve with S? as-fig3 fixed S = 64 and S = 2048 first (the deciding pair), S = 512
    last;
(b) do upper layers learn longer spans? as-fig4 (adaptive, S = 2048: also as-fig3's adaptive cell);

then regenerates the two reports (`repro report as-fig3`, `repro report as-fig4` under ``--results``).
Each cell is one `repro run`, stopped with SIGTERM when the budget (``--budget`` seconds, 540 by default:
a 15-minute lease less start-up) runs out, which checkpoints it: running the script again resumes it
(finished runs are skipped). Before anything trains, the corpus must be prepared under ``$REPRO_DATA``
(the GPU machine reaches no network: prepare linux-doc where one does, `repro data prepare linux-doc`,
and carry that data folder, about 45 MB). A line per cell and report says what it did; the exit status
is 0 when every cell finished and both reports were written, 1 otherwise, 2 for a missing corpus.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCALE = "gpu10"
# (manifest, --only filters) in the order they decide: the fixed pair, the depth trend, the middle S
CELLS = [
    ("as-fig3", ["kind=fixed", "limit=64"]),
    ("as-fig3", ["kind=fixed", "limit=2048"]),
    ("as-fig4", []),
    ("as-fig3", ["kind=fixed", "limit=512"]),
]
REPORTS = ["as-fig3", "as-fig4"]
# the dry run: a toy model on the offline tiny corpus, a few steps, on CPU; each S scaled down 32 times
TOY = [
    "data.name=wiki-lead8",
    "data.block=16",
    "model.layers=2",
    "model.d_model=16",
    "model.d_ff=32",
    "model.heads=2",
    "train.steps=3",
    "train.warmup=1",
    "train.precision=32-true",
    "train.val_every=0",
    "train.checkpoint_every=3",
    "eval.splits=[valid]",
]


def commands(dry: bool) -> list[tuple[str, list[str]]]:
    """(what, repro arguments) of every cell, then of every report (a dry run's cells are derived
    manifests, named by their overrides, so each is reported with its own)."""
    runs, reports = [], {m: ["report", m] for m in REPORTS}
    for manifest, only in CELLS:
        what = f"{manifest} {' '.join(only) or 'adaptive'}"
        if not dry:
            runs.append((what, ["run", manifest, "--scale", SCALE, *[x for f in only for x in ("--only", f)]]))
            continue
        limit = next((int(f.split("=")[1]) for f in only if f.startswith("limit=")), 2048) // 32
        kind = [x for f in only if f.startswith("kind=") for x in ("--only", f)]
        overrides = [*TOY, f"model.span.limit={limit}"]
        runs.append((what, ["run", manifest, "--scale", SCALE, *kind, *overrides]))
        reports[f"{manifest} S={limit}"] = ["report", manifest, *overrides]
    if dry:
        reports = {k: v for k, v in reports.items() if len(v) > 2}
    return [(w, [*cli, "--no-wandb"]) for w, cli in runs] + [(f"report {w}", cli) for w, cli in reports.items()]


def _run(cli: list[str], results: Path, seconds: float) -> tuple[int | str, list[str]]:
    """``repro --results RESULTS ...`` in a subprocess, stopped with SIGTERM (it checkpoints) after
    ``seconds``; its exit status (or ``stopped``) and last lines."""
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "repro", "--results", str(results), *cli]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": pythonpath, "WANDB_MODE": "disabled"},
    )
    try:
        out, _ = proc.communicate(timeout=max(1.0, seconds))
        status: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate()
        status = "stopped"
    return status, out.strip().splitlines()[-2:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, toy sizes, a few steps: the script's own test")
    parser.add_argument("--results", default=None, help="results root (default: results/; a dry run: a temp folder)")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds of training and reports in all")
    args = parser.parse_args(argv)
    results = Path(args.results or (tempfile.mkdtemp(prefix="gpu-findings-") if args.dry_run else ROOT / "results"))
    if not args.dry_run:
        sys.path.insert(0, str(ROOT))
        from repro import data

        why = data.missing("linux-doc")
        if why:
            print(f"error: {why}; the GPU machine has no network: carry a prepared $REPRO_DATA", file=sys.stderr)
            return 2
    deadline = time.monotonic() + args.budget
    failed = 0
    for what, cli in commands(args.dry_run):
        left = deadline - time.monotonic()
        if left <= 0 and cli[0] == "run":
            print(f"{what}: not started, the budget is spent (run the script again to train it)", flush=True)
            failed += 1
            continue
        started = time.monotonic()
        status, tail = _run(cli, results, left if cli[0] == "run" else 300)
        failed += status != 0
        print(f"{what}: exit {status} after {time.monotonic() - started:.0f} s | {' | '.join(tail)}", flush=True)
    print(f"results under {results}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
