"""``repro status``: the stored runs (and submitted jobs) with their state and scores."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from repro.cli.common import fmt, json_value, select, store_root
from repro.console import print_table
from repro.store.runs import CorruptFile, RunDir, scan
from repro.train import launch


def run_state(run: RunDir) -> str:
    """A run's status as `repro run` sees it (a corrupt summary or spec: the run is redone)."""
    try:
        state = run.summary().get("status", "to run")
    except CorruptFile:
        return "corrupt summary: redone by run"
    return "corrupt spec: redone by run" if state == "finished" and not run.finished else state


def cmd_status(args) -> int:
    root = store_root(args)
    names = [m.name for m in select(args)] if args.name else [None]
    scanned = [scan(root, name) for name in names]
    runs = [r for frame, _ in scanned for r in frame.to_dict("records")]
    corrupt = [line for _, lines in scanned for line in lines]
    cols = ("manifest", "run_id", "scale", "status", "steps", "valid_bits", "test_bits")
    jobs = _jobs(root, names, runs)
    if jobs:
        cols += ("job", "job_state")
    if args.json:
        print(json.dumps([{c: json_value(r.get(c)) for c in cols} for r in runs], indent=2))
        for line in corrupt:  # stdout stays one JSON document
            print(f"corrupt: {line}", file=sys.stderr)
        return 0
    if not runs and not corrupt:
        print(f"no stored runs under {root}/runs")
        return 0
    if runs:
        print_table([cols, *([fmt(r.get(c)) for c in cols] for r in runs)])
    for line in corrupt:
        print(f"corrupt: {line}")
    return 0


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
