"""``repro status``: the stored runs (and submitted jobs) with their state and scores."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path

from repro.cli import options, stale
from repro.cli.common import fmt, json_value, override_args, select, store_root
from repro.config import lookup
from repro.config.cells import cell_text
from repro.config.metrics import MFU_REASON, implausible_mfu
from repro.console import print_table
from repro.registry import Command
from repro.store.provenance import DIRTY
from repro.store.runs import RunDir, listing
from repro.train import launch, throughput


def cmd_status(args) -> int:
    root = store_root(args)
    # a gathering manifest (parts, no runs of its own) shows its parts' runs
    found = select(args) if args.name else []
    for m in found:
        if m.base is None and m.parts and not args.json:
            print(f"{m.name} trains nothing; it gathers {len(m.parts)} manifests: {', '.join(m.parts)}")
    names = [m.name for m in lookup.with_parts(found, override_args(args))] if args.name else [None]
    scanned = [listing(root, name) for name in names]
    runs = [_described(root, row, cell) for found, _ in scanned for row, cell in found]
    left = [out for _, outs in scanned for out in outs]  # corrupt or unreadable run folders
    cols = ("manifest", "run_id", "cell", "seed", "scale", "status", "steps", "valid_bits", "test_bits", "mfu")
    if args.dirty:
        runs = [r for r in runs if str(r.get("code_version") or "").endswith(DIRTY)]
        cols += ("code_version",)
    if args.stale:
        runs = stale.runs(root, runs)
        cols += ("code_version", "stale")
    jobs = _jobs(root, names, runs)
    if jobs:
        cols += ("job", "job_state")
    if args.json:
        print(json.dumps([{c: json_value(r.get(c)) for c in cols} for r in runs], indent=2))
        for out in left:  # stdout stays one JSON document
            print(out, file=sys.stderr)
        return 0
    if not runs and not left and not args.dirty and not args.stale:
        print(f"no stored runs under {root}/runs")
        return 0
    if runs:
        print_table([cols, *([_shown(r, c) for c in cols] for r in runs)])
    if any(_above_peak(r) for r in runs):
        print(f"* implausible ({MFU_REASON}): {throughput.ABOVE_PEAK}")
    if args.dirty:
        counts = Counter(r["manifest"] for r in runs)
        shown = ", ".join(f"{name} {n}" for name, n in sorted(counts.items()))
        print(f"{len(runs)} stored run(s) trained from uncommitted code{': ' + shown if shown else ''}")
    if args.stale:
        print(stale.summary(runs))
    for out in left:
        print(out)
    return 0


def _above_peak(row: dict) -> bool:
    """Whether a run's stored MFU exceeds 1 (its machine's peak was measured under load)."""
    return implausible_mfu(row.get("mfu"))


def _shown(row: dict, col: str) -> str:
    """A cell of the table: an MFU above 1 is marked implausible (the note under the table says why)."""
    return fmt(row.get(col)) + (" implausible*" if col == "mfu" and _above_peak(row) else "")


def _described(root: Path, row: dict, cell: dict) -> dict:
    """A listed run with its grid cell in words, its seed, and, unfinished, its steps so far out of its
    steps (``120/600``: the steps done up to the last row its metrics logged)."""
    row = {**row, "cell": cell_text(cell) or "-", "seed": row.get("train.seed")}
    if row.get("status") != "finished" and _missing(row.get("steps")):
        logged = RunDir(root, row["manifest"], row["run_id"]).metrics()
        # a row's step counts from 0 (the 5th step logs step 4): steps done, as the interrupt line counts
        done = int(logged["step"].max()) + 1 if "step" in logged and logged["step"].notna().any() else 0
        row["steps"] = f"{done}/{row['train.steps']}" if not _missing(row.get("train.steps")) else str(done)
    return row


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _jobs(root: Path, names: list, runs: list[dict]) -> dict:
    """The job records of the shown manifests' runs, each with its state; a submitted run that has not
    started yet (nothing stored) is added to ``runs`` as ``submitted``."""
    jobs = {key: job for key, job in launch.records(root).items() if names == [None] or key[0] in names}
    stored = {(r["manifest"], r["run_id"]): r for r in runs}
    for key in jobs:
        if key not in stored:
            stored[key] = {"manifest": key[0], "run_id": key[1], "status": "submitted"}
            runs.append(stored[key])
    for key, job in jobs.items():
        stored[key].update(job=job["job_id"], job_state=launch.state(job, stored[key].get("status")))
    return jobs


def add_arguments(p, parents) -> None:
    options.manifest_args(p, scale=False, optional="a manifest or group (default: every stored run)")
    p.add_argument("--json", action="store_true", help="print JSON (one object per run)")
    p.add_argument(
        "--dirty",
        action="store_true",
        help="only the runs trained from uncommitted code (code_version +dirty), counted per manifest "
        "(`repro retrain` trains them again from committed code)",
    )
    p.add_argument(
        "--stale",
        action="store_true",
        help="only the finished runs whose computation digest differs from what today's code executes for "
        "their spec (or is unknown: +dirty), with the hours their retraining takes (`repro retrain --stale`)",
    )


COMMAND = Command("status", "stored runs and their state", add_arguments, cmd_status)
