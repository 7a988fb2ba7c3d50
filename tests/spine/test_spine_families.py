"""The adaptive-span family's facts outside its numbers code, stated once (repro/families/adaptive_span.py):
which runs learn their span, and each span metric at the initial span z = 0."""

from __future__ import annotations

import math

import pandas as pd

from repro.families import adaptive_span
from repro.report.derived import span_growth


def test_a_frontier_window_is_a_fixed_span_whatever_its_span_kind_says():
    """The frontier picks its span by ``model.attention``; ``model.span.kind`` keeps its default there."""
    frontier = pd.DataFrame(
        {"model.attention": ["window", "adaptive", "dynamic", "dense"], "model.span.kind": "adaptive"}
    )
    assert adaptive_span.learned(frontier).tolist() == [False, True, True, False]
    kinds = pd.DataFrame({"model.span.kind": ["fixed", "adaptive", "dynamic"]})
    assert adaptive_span.learned(kinds).tolist() == [False, True, True]
    assert adaptive_span.learned(pd.DataFrame({"model.pattern": ["dense"]})) is None
    assert [adaptive_span.learns(a) for a in ("window", "adaptive", "dynamic")] == [False, True, True]


def test_the_initial_span_is_min_S_R_for_the_learned_spans_only():
    rows = pd.DataFrame(
        {
            "model.span.kind": ["adaptive", "adaptive", "fixed"],
            "model.span.limit": [1024, 16, 512],
            "span_limit": [1024, 16, 512],
            "model.span.ramp": [32, 32, 32],
            "avg_span": [300.0, 16.0, 512.0],
            "span_lower_half": [250.0, 0.0, 512.0],
        }
    )
    start = adaptive_span.at_initial_span(rows, adaptive_span.learned(rows))
    assert start["avg_span"].tolist() == [32.0, 16.0, 512.0]  # min(S, R); the fixed span untouched
    assert start["span_lower_half"].tolist() == [0.0, 0.0, 512.0]
    assert rows["avg_span"].tolist() == [300.0, 16.0, 512.0]  # the rows given are not changed
    assert adaptive_span.at_initial_span(rows.drop(columns="model.span.ramp"), adaptive_span.learned(rows)) is None


def test_span_growth_counts_from_the_same_initial_span():
    """The summary's S is read before the spec's; a run that records no span has none."""
    row = pd.Series({"span_limit": 64, "model.span.limit": 8192, "model.span.ramp": 32, "avg_span": 40.0})
    assert span_growth(row) == 40.0 - 32.0
    assert span_growth(pd.Series({**row, "span_limit": 16})) == 40.0 - 16.0
    assert math.isnan(span_growth(pd.Series({"model.span.limit": 64, "avg_span": 40.0})))
