"""scripts/gpu_check.py runs end to end in its dry mode (CPU, toy sizes), so the GPU check cannot rot
before a GPU is lent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


def test_gpu_check_dry_run_leaves_every_steps_records(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in (tmp_path / "gpu-check-dry-run.jsonl").read_text().splitlines()]
    by_step: dict[str, list[dict]] = {}
    for r in records:
        by_step.setdefault(r["step"], []).append(r)
    assert set(by_step) == {
        "environment",
        "st-step",
        "adaptive-step",
        "attention",
        "run-adaptive-span",
        "run-sparse-transformer",
    }
    for name in ("st-step", "adaptive-step"):  # a training step of each family, with its MFU
        measured = [r for r in by_step[name] if "seconds_per_step" in r]
        assert measured and all(0 < r["mfu"] < 1 and r["peak_flops_per_second"] > 0 for r in measured)
    assert {r.get("pattern") for r in by_step["st-step"]} >= {"dense", "fixed", "strided"}
    for name in ("run-adaptive-span", "run-sparse-transformer"):  # runs whose summaries carry MFU and load
        (summary,) = [r for r in by_step[name] if "status" in r and r.get("run_id")]
        assert summary["status"] == "finished" and summary["mfu"] > 0 and "load_average_max" in summary
