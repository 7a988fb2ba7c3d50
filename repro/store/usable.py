"""Whether a finished run's numbers can be used. One check of a stored value (:func:`fault`) and one of a
training curve (:func:`has_curve`), made by the report's verdicts of each run they read
(:mod:`repro.claims.select`, :mod:`repro.claims.trajectory`) and by ``repro run`` of a finished run of the
same computation before adopting it (:func:`damage`, :mod:`repro.store.settle`): a twin whose summary lost
its bits or holds text for them, or whose metrics.csv is gone, is passed over and the run trained.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import pandas as pd

from repro.errors import StoreError, UserError
from repro.store.runs import RunDir

MISSING, NOT_A_NUMBER = "missing", "not a number"
TRAIN = "train/bits"  # the curve every trained run logs (the trajectory gate's fallback)
SPLITS = ("valid", "test")  # eval.splits when a spec does not say


def fault(value: Any) -> str | None:
    """Why a stored metric's value is no number to use: :data:`MISSING` (absent: None, NaN, pandas' NA)
    or :data:`NOT_A_NUMBER` (text such as ``"NaN"``, a boolean, a list); None for a number."""
    if isinstance(value, (bool, np.bool_)):
        return NOT_A_NUMBER
    if isinstance(value, numbers.Real):  # numpy's too
        return MISSING if math.isnan(value) else None
    if isinstance(value, str):
        try:
            return NOT_A_NUMBER if math.isnan(float(value)) else None
        except ValueError:
            return NOT_A_NUMBER
    return MISSING if value is None or value is pd.NA else NOT_A_NUMBER


def has_curve(frame: pd.DataFrame | None) -> bool:
    """Whether a run's metrics (:meth:`RunDir.metrics`) hold a learning curve: a logged step with its
    training bits."""
    return frame is not None and {"step", TRAIN} <= set(frame) and bool(frame[TRAIN].notna().any())


def damage(run: RunDir, spec: dict[str, Any], summary: dict[str, Any]) -> str | None:
    """Why the finished run ``run`` (its stored spec and summary) cannot be used, in one phrase naming its
    file; None when it can: every score its spec asks for (``<split>_bits`` of ``eval.splits``,
    ``test_bits_ctx<C>`` of ``eval.context_sweep``) a number, and a run that trained (no ``train.weights``)
    a learning curve in its metrics.csv."""
    evaluation = spec.get("eval") or {}
    scores = [f"{split}_bits" for split in evaluation.get("splits", SPLITS)]
    scores += [f"test_bits_ctx{context}" for context in evaluation.get("context_sweep") or ()]
    for key in scores:
        why = fault(summary.get(key))
        if why == MISSING:
            return f"{run.path / 'summary.json'}: no {key}"
        if why:
            return f"{run.path / 'summary.json'}: {key} is {str(summary[key])[:40]!r}, {why}"
    if (spec.get("train") or {}).get("weights"):
        return None  # pretrained weights, scored: nothing was logged
    if not run.metrics_path.exists():
        return f"{run.metrics_path}: missing"
    try:
        curve = run.metrics()
    except (UserError, StoreError) as err:
        return str(err)
    return None if has_curve(curve) else f"{run.metrics_path}: no {TRAIN} logged"
