"""The adaptive span's facts outside its numbers code: which spans are learned, where a learned span
starts, and the spec keys and summary metrics that say so. The claims (the initial-span control,
:mod:`repro.claims.gates`), the reports (``span_growth``, :mod:`repro.report.derived`), the metrics a
claim may name (:mod:`repro.config.metrics`) and ``repro bench frontier`` read them here.

A span is *learned* in a run of the ``adaptive_span`` family whose ``model.span.kind`` is adaptive or
dynamic, and in a frontier run whose ``model.attention`` is (the frontier's ``window`` is the fixed span;
its ``model.span.kind`` keeps its default whatever the attention). A learned span starts at z = 0, where
the effective span min(S, z + R) is min(S, R) (S = ``model.span.limit``, R = ``model.span.ramp``). The
mechanism itself (the soft mask, each kind's z, the effective span of a trained model) is
:mod:`repro.models.span`, which the computation digest hashes; nothing here is run by a training run.
"""

from __future__ import annotations

import numpy as np

LEARNED = ("adaptive", "dynamic")  # the span kinds (model.span.kind) and frontier attentions that learn z
KIND = "model.span.kind"
ATTENTION = "model.attention"  # the frontier's: which attention, and so which span kind
LIMIT = "model.span.limit"  # S
RAMP = "model.span.ramp"  # R
STORED_LIMIT = "span_limit"  # S as a finished run's summary stores it
# the span metrics whose value at the initial span (z = 0) is known: the average effective span min(S, R),
# the mean z's 0
INITIAL = ("avg_span", "span_lower_half", "span_upper_half")


def learns(name: str) -> bool:
    """Whether a span kind or a frontier attention of this name learns its span."""
    return name in LEARNED


def learned(rows):
    """Which of ``rows`` (a table of runs: spec keys as columns) learn their span, a boolean column (None:
    the rows do not say)."""
    if ATTENTION in rows:
        return rows[ATTENTION].isin(LEARNED)
    if KIND in rows:
        return rows[KIND].isin(LEARNED)
    return None


def limit(rows):
    """S of ``rows`` (a run's row, or a table's column): the summary's ``span_limit``, else the spec's
    ``model.span.limit`` (None: neither)."""
    return rows[STORED_LIMIT] if STORED_LIMIT in rows else rows.get(LIMIT)


def initial_span(limit, ramp):
    """The effective span at z = 0, min(S, R), of numbers or of columns alike."""
    return np.minimum(limit, ramp)


def at_initial_span(rows, which):
    """``rows`` (a table of runs) with the :data:`INITIAL` metrics of the rows ``which`` selects (a boolean
    column: the learned spans) at their value at z = 0: the average effective span min(S, R), the mean z's
    0; None where the rows do not record S and R."""
    out = rows.copy()
    S, R = limit(out), out.get(RAMP)
    for metric in [m for m in INITIAL if m in out]:
        if metric != "avg_span":
            out[metric] = out[metric].where(~which, 0.0)
        elif S is None or R is None:
            return None
        else:
            out[metric] = out[metric].where(~which, initial_span(S, R))
    return out
