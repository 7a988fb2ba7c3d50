"""Power at the level the verdict is read (issue 60, point 6): the MDE at Holm's level where REPORT.md leads
with Holm, a band's smallest effect its half-width, and how noisy the MDE itself is at 3 seeds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from repro.claims import gates, stats
from repro.report.multiplicity import multiplicity
from repro.report.results import ClaimResult


def _runs(margins: list[float], kind: str = "b") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model.span.kind": k, "train.seed": seed, "status": "finished", "test_bits": 2.0 + shift}
            for seed, m in enumerate(margins)
            for k, shift in (("a", 0.0), (kind, m))
        ]
    )


def test_a_bands_smallest_effect_is_its_half_width():
    verdict = gates.evaluate(
        "abs(test_bits[kind=a] - test_bits[kind=b]) < 0.05", _runs([0.01, -0.02, 0.0]), ["model.span.kind"]
    )
    assert verdict.sesoi == 0.05
    directional = gates.evaluate(
        "test_bits[kind=a] < test_bits[kind=b]", _runs([0.01, -0.02, 0.0]), ["model.span.kind"]
    )
    assert directional.sesoi == 0.02  # a bits claim's default


def test_uninformative_is_judged_at_holms_level_where_the_verdict_leads_with_holm():
    """A within-noise verdict whose MDE at its own 5% is under the smallest effect, but over it at the
    Holm bar of its family: REPORT.md calls it uninformative, at that level."""
    keys = ["model.span.kind"]
    noisy = gates.evaluate("test_bits[kind=a] < test_bits[kind=b]", _runs([0.014, -0.008, 0.006, -0.004]), keys)
    assert noisy.status == "within noise" and noisy.decided.mde < noisy.sesoi < noisy.decided.mde_at(0.025)
    assert not noisy.uninformative
    strong = [
        gates.evaluate("test_bits[kind=a] < test_bits[kind=b]", _runs([0.3 + i, 0.31, 0.32, 0.3]), keys)
        for i in (0, 1, 2)
    ]
    results = [
        ClaimResult("m", "cpu", f"c{i}", "", "test_bits[kind=a] < test_bits[kind=b]", v)
        for i, v in enumerate([noisy, *strong])
    ]
    for i, r in enumerate(results):  # distinct runs: four tests, not one
        r.verdict.runs = frozenset({f"r{i}"})
    multiplicity(results, 0.05, {"m": "paper"})
    assert noisy.read_at == pytest.approx(0.05 / 1 / 2)  # its p is the largest: Holm's last bar, alpha / 1
    strong_bars = sorted(r.verdict.read_at for r in results[1:])
    assert strong_bars == pytest.approx([0.05 / 4 / 2, 0.05 / 3 / 2, 0.05 / 2 / 2])
    assert noisy.mde == pytest.approx(noisy.decided.mde_at(0.025)) and noisy.mde > noisy.decided.mde
    assert noisy.uninformative and "MDE 0.0211 at Holm's level 0.025 > 0.02: uninformative" in noisy.effect


def test_at_three_seeds_the_mde_is_itself_noisy():
    """True MDE equal to the smallest effect: the estimated MDE exceeds it 37% of the time (e^-1) at 3 seeds."""
    rng = np.random.default_rng(60)
    sd = rng.standard_normal((200_000, 3)).std(axis=1, ddof=1)
    assert float((sd > 1).mean()) == pytest.approx(math.exp(-1), abs=0.005)
    assert stats.noisy_mde(3) == pytest.approx(math.exp(-1))
