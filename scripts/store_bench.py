#!/usr/bin/env python
"""How `repro status` and `repro report NAME` scale with the store: build a store of N finished runs
of one manifest, then time both commands as a user runs them (fresh processes, wall seconds).

    python scripts/store_bench.py                       # 5,000 runs in a temporary folder
    python scripts/store_bench.py --store /tmp/s5000    # build there once, reuse it on later calls
    python scripts/store_bench.py --runs 200 --out -    # a quick look; records to stdout only

The manifest (written into the store's folder) sweeps 50 learning rates with 100 seeds each (at 5,000
runs): its report renders 50 grid cells from every run. Each run holds a spec.yaml (its real resolved spec,
so its id checks), a summary.json of a finished run and a 100-row metrics.csv. Each command is timed
twice in turn: ``first`` on the store as built, ``again`` right after (what a store's index, where
there is one, spares). A record (figures, run count, code version, CPU count, load average) is appended
to ``--out`` (default results/bench/store.jsonl) as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from repro.config import manifest as manifests
from repro.store.provenance import code_version

LRS = 50
MANIFEST = """\
name: store-bench
title: "store scale benchmark"
paper: suite
base:
  data: {{name: wiki-lead8, block: 64}}
  model: {{family: sparse_transformer, pattern: dense, layers: 1, d_model: 32, heads: 2, dropout: 0.0}}
  train: {{optimizer: adam, lr: 3.0e-3, batch_size: 4, steps: 1000, log_every: 10}}
  eval: {{batch_size: 32, min_context: 32}}
grid:
  train.lr: [{lrs}]
scales:
  tiny: {{seeds: {seeds}}}
requires: ["learned[]"]
claims:
  - {{id: learns, text: "every model learned the data", check: "learned[]"}}
"""


def build(folder: Path, runs: int) -> Path:
    """The manifest and its ``runs`` finished runs under ``folder/results`` (kept if already there)."""
    path = folder / "store-bench.yaml"
    lrs = ", ".join(f"{(i + 1) * 1e-4:.1e}" for i in range(min(LRS, runs)))
    path.write_text(MANIFEST.format(lrs=lrs, seeds=max(1, runs // LRS)))
    metrics = "step,train/bits,train/lr\n" + "".join(f"{s},{3 - s / 500:.4f},0.003\n" for s in range(0, 1000, 10))
    for spec in manifests.load(path).expand("tiny"):
        run = folder / "results" / "runs" / spec.manifest / spec.run_id
        if (run / "summary.json").exists():
            continue
        run.mkdir(parents=True, exist_ok=True)
        (run / "spec.yaml").write_text(yaml.safe_dump(spec.record("bench"), sort_keys=False))
        (run / "metrics.csv").write_text(metrics)
        bits = 1.5 + (spec.train.seed % 7) / 100 + spec.train.lr
        summary = {
            "status": "finished", "run_id": spec.run_id, "manifest": spec.manifest, "scale": "tiny",
            "cell": spec.cell, "dataset": "wiki-lead8", "valid_bits": bits, "test_bits": bits + 0.01,
            "unigram_bits": 4.2, "params": 14000, "steps": 1000, "seconds_per_step": 0.01,
        }  # fmt: skip
        (run / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return path


def timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "repro", *args], capture_output=True, text=True, env=env, cwd=cwd)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"repro {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--store", help="the folder to build the store in (default: a temporary one)")
    parser.add_argument("--out", default="results/bench/store.jsonl", help="JSON-lines file ('-': stdout only)")
    args = parser.parse_args()
    folder = Path(args.store or tempfile.mkdtemp(prefix="store-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    manifest = build(folder, args.runs)
    built = time.perf_counter() - t0
    env = {**os.environ, "REPRO_RESULTS": str(folder / "results")}
    record = {"bench": "store", "runs": len(list((folder / "results" / "runs").glob("*/*/spec.yaml")))}
    for attempt in ("first", "again"):
        record[f"status_s_{attempt}"] = round(timed(["status"], env, folder), 2)
        record[f"report_s_{attempt}"] = round(timed(["report", str(manifest)], env, folder), 2)
    record.update(
        build_s=round(built, 1),
        code_version=code_version(),
        cpus=os.cpu_count(),
        load_avg=[round(x, 2) for x in os.getloadavg()],
        machine=platform.processor() or platform.machine(),
        store=str(folder),
        when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    line = json.dumps(record)
    print(line)
    if args.out != "-":
        with open(args.out, "a") as fh:
            fh.write(line + "\n")


if __name__ == "__main__":
    main()
