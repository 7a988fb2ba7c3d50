"""Metrics a claim may name that no summary stores, computed from what every stored run has (its summary,
spec and training curve) when a claim asks for them, so stored runs have them without retraining; and the
loaders the verdict gates read (:func:`curves`, :func:`computes`), and each run's computation digest
(``digest``, :mod:`repro.store.digests`) beside its ``code_version``.

``span_growth``: how far the average effective span grew from its initial value (z = 0: min(S, R)), in
tokens: the estimated quantity a claim *about* span growth judges, with its own interval (it replaced the
``moved`` gate, which asked a knife-edge threshold of every span claim).

``valid_gain_last_fifth``: how much the quick validation still improved over the last fifth of training,
the bits at the last quick validation at or before 80% of the steps minus the bits at the last one. A
model whose gain is still large had not learned what it can at its budget (issue: "dense trained until it
has learned what it can"): a comparison with it says as much about the budget as about the model.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from repro.errors import UserError
from repro.families import adaptive_span
from repro.store.digests import Digests
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


def span_growth(row: pd.Series) -> float:
    """The average effective span minus its initial value (:func:`repro.families.adaptive_span.initial_span`,
    min(S, R); NaN: the run records no span)."""
    limit, ramp, span = adaptive_span.limit(row), row.get(adaptive_span.RAMP), row.get("avg_span")
    if any(v is None or pd.isna(v) for v in (limit, ramp, span)):
        return math.nan
    return float(span) - float(adaptive_span.initial_span(float(limit), float(ramp)))


def curves(root: Path, manifest: str):
    """A run id -> its training curve (metrics.csv; None when unreadable), for the trajectory gate."""

    def load(run_id: str) -> pd.DataFrame | None:
        try:
            return RunDir(root, manifest, run_id).metrics()
        except (UserError, OSError):
            return None

    return load


def computes(root: Path, manifest: str, digests: Digests | None = None):
    """A (run id, commit) -> the digest of that run's spec at that commit (None: unknown), for the
    provenance gate (:mod:`repro.claims.pairs`)."""
    digests = digests or Digests(root)

    def at(run_id: str, commit: str) -> str | None:
        spec = _spec(root, manifest, run_id)
        found = digests.at(spec, commit).digest if spec else None
        digests.save()
        return found

    return at


def add(runs: pd.DataFrame, root: Path, manifest: str, names: set[str]) -> pd.DataFrame:
    """``runs`` with a column for each derived metric of ``names`` (finished runs only; NaN otherwise)."""
    if runs.empty:
        return runs
    out = runs.copy()
    if "span_growth" in names:
        out["span_growth"] = [span_growth(row) for _, row in out.iterrows()]
    specs = [_spec(root, manifest, r) for r in out["run_id"]] if names & {"code_version", "digest"} else []
    if "code_version" in names:
        out["code_version"] = [s.get("code_version") if s else None for s in specs]
    if "digest" in names:
        digests = Digests(root)
        stamped = [{k: row.get(k) for k in ("digest", "digest_format") if k in out} for _, row in out.iterrows()]
        out["digest"] = [digests.own(s, k).digest if s else None for s, k in zip(specs, stamped, strict=True)]
        digests.save()
    wanted = [n for n in DERIVED if n in names]
    for name in wanted:
        values = []
        for _, run in out.iterrows():
            steps = run.get("steps")
            finished = run.get("status") == "finished" and steps is not None and not pd.isna(steps)
            curve = RunDir(root, manifest, run["run_id"]).metrics() if finished else None
            values.append(DERIVED[name](curve, int(steps)) if finished else math.nan)
        out[name] = values
    return out


def _spec(root: Path, manifest: str, run_id: str) -> dict | None:
    try:
        return RunDir(root, manifest, run_id).spec()
    except (UserError, OSError):
        return None
