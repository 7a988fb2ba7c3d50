"""Metrics a claim may name that no summary stores: read from a run's training curve (metrics.csv) when a
claim asks for them, so every stored run has them without retraining.

``valid_gain_last_fifth``: how much the quick validation still improved over the last fifth of training,
the bits at the last quick validation at or before 80% of the steps minus the bits at the last one. A
model whose gain is still large had not learned what it can at its budget (issue: "dense trained until it
has learned what it can"): a comparison with it says as much about the budget as about the model.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from repro.store.runs import RunDir

QUICK = "valid/bits_quick"


def valid_gain_last_fifth(curve: pd.DataFrame, steps: int) -> float:
    """Bits at the last quick validation at or before 0.8 ``steps`` minus bits at the last one (NaN when
    the curve has no check before the last fifth)."""
    if QUICK not in curve or "step" not in curve:
        return math.nan
    checks = curve.dropna(subset=[QUICK]).sort_values("step")
    before = checks[checks["step"] + 1 <= 0.8 * steps]
    if before.empty or len(checks) < 2:
        return math.nan
    return float(before[QUICK].iloc[-1] - checks[QUICK].iloc[-1])


DERIVED = {"valid_gain_last_fifth": valid_gain_last_fifth}


def add(runs: pd.DataFrame, root: Path, manifest: str, names: set[str]) -> pd.DataFrame:
    """``runs`` with a column for each derived metric of ``names`` (finished runs only; NaN otherwise)."""
    wanted = [n for n in DERIVED if n in names]
    if not wanted or runs.empty:
        return runs
    out = runs.copy()
    for name in wanted:
        values = []
        for _, run in out.iterrows():
            steps = run.get("steps")
            finished = run.get("status") == "finished" and steps is not None and not pd.isna(steps)
            curve = RunDir(root, manifest, run["run_id"]).metrics() if finished else None
            values.append(DERIVED[name](curve, int(steps)) if finished else math.nan)
        out[name] = values
    return out
