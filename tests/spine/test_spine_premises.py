"""The premises a claim's meaning needs (issue 60, point 4): "far context helps" (``nonincreasing(x)``: a
fixed span's bits do not rise along S) and "the dense baseline is trained" (dense not worse than the sparse
arm it bounds by more than the claim's smallest effect of interest, ``+ sesoi``), each judged on every seed
with its numbers; the shipped Sparse Transformer comparisons against dense declare the second."""

from __future__ import annotations

import pandas as pd
import pytest

from repro.claims import gates, power
from repro.config import lookup
from repro.config import manifest as manifests
from repro.grammar import language

KEYS = ["model.span.kind", "model.span.limit"]
CLAIM = "test_bits[kind=adaptive] < min(test_bits[kind=fixed])"
FAR = "nonincreasing(test_bits[kind=fixed])"


def _spans(fixed: dict[int, list[float]]) -> pd.DataFrame:
    """Fixed spans at S -> bits per seed, and an adaptive span 0.3 bits below the best of them."""
    rows = [
        {"model.span.kind": "fixed", "model.span.limit": s, "train.seed": i, "status": "finished", "test_bits": b}
        for s, bits in fixed.items()
        for i, b in enumerate(bits)
    ]
    best = min(min(b) for b in fixed.values())
    rows += [
        {
            "model.span.kind": "adaptive",
            "model.span.limit": s,
            "train.seed": i,
            "status": "finished",
            "test_bits": best - 0.3 + 0.01 * i,
        }
        for s in fixed
        for i in range(3)
    ]
    return pd.DataFrame(rows)


def test_far_context_helps_holds_when_the_fixed_bits_fall_along_s_on_every_seed():
    falling = _spans({64: [2.7, 2.72, 2.71], 128: [2.6, 2.61, 2.6], 256: [2.5, 2.52, 2.55]})
    verdict = gates.evaluate(CLAIM, falling, KEYS, requires=[FAR])
    assert verdict.status == "reproduced", verdict.detail
    assert any(h.startswith(f"premise `{FAR}`: holds on every seed (") for h in verdict.held)
    # S = 256 worse than 128 on one seed: the premise fails on that seed, saying where
    rising = _spans({64: [2.7, 2.72, 2.71], 128: [2.6, 2.61, 2.6], 256: [2.5, 2.52, 2.65]})
    stopped = gates.evaluate(CLAIM, rising, KEYS, requires=[FAR])
    assert stopped.status == "not evaluable" and stopped.failed == [FAR]
    assert "256 after 128" in stopped.detail and "fails on seed 2 of 3" in stopped.detail
    one = gates.precondition(FAR, _spans({64: [2.7, 2.72, 2.71]}), KEYS)
    assert one.status == "not evaluable" and "needs two cells or more" in one.detail
    with pytest.raises(language.ClaimError, match="takes one selection"):
        language.parse("nonincreasing(test_bits[kind=fixed], test_bits[kind=adaptive])")


def _patterns(dense: list[float]) -> pd.DataFrame:
    bits = {"fixed": [3.20, 3.21, 3.19], "dense": dense}
    return pd.DataFrame(
        [
            {"model.pattern": p, "train.seed": i, "status": "finished", "test_bits": b}
            for p, values in bits.items()
            for i, b in enumerate(values)
        ]
    )


def test_the_dense_baseline_premise_binds_the_claims_smallest_effect():
    claim = "test_bits[pattern=fixed] <= test_bits[pattern=dense] + 0.01"
    premise = "test_bits[pattern=dense] <= test_bits[pattern=fixed] + sesoi"
    assert power.of_claim(claim) == 0.02 and power.of_claim("abs(test_bits[a=1] - test_bits[a=2]) < 0.05") == 0.05
    assert power.bound(premise, 0.02) == "test_bits[pattern=dense] <= test_bits[pattern=fixed] + 0.02"
    # dense 0.015 worse: inside its 0.02 sesoi, the claim is judged
    trained = gates.evaluate(claim, _patterns([3.215, 3.225, 3.205]), ["model.pattern"], requires=[premise])
    assert trained.status != "not evaluable" and any("premise `" in h and "+ 0.02`" in h for h in trained.held)
    # dense 0.05 worse: under-trained, the claim is not judged; a declared sesoi is the one bound
    short = gates.evaluate(claim, _patterns([3.25, 3.26, 3.24]), ["model.pattern"], requires=[premise])
    assert short.status == "not evaluable" and short.failed == [power.bound(premise, 0.02)]
    wider = gates.evaluate(claim, _patterns([3.25, 3.26, 3.24]), ["model.pattern"], requires=[premise], sesoi=0.1)
    assert wider.status != "not evaluable"
    # a claim with no smallest effect (a cost) cannot bind it: the premise says so
    cost = gates.precondition(premise, _patterns([3.2, 3.2, 3.2]), ["model.pattern"])
    assert cost.status == "not evaluable" and "sesoi is not bound" in cost.detail


def test_the_shipped_comparisons_against_dense_declare_the_dense_premise_and_as_fig3_far_context():
    def premises(name, claim_id):
        m = lookup.load(manifests.discover()[name])
        return next(c for c in m.claims if c.id == claim_id).requires

    dense = {
        (
            "st-table2-enwik8",
            "fixed-matches-dense-text",
        ): "test_bits[pattern=dense] <= test_bits[pattern=fixed] + sesoi",
        (
            "st-table2-cifar10",
            "strided-matches-dense-images",
        ): "valid_bits[pattern=dense] <= valid_bits[pattern=strided] + sesoi",
        ("frontier", "dense-matches-fixed"): "test_bits[variant=dense] <= test_bits[variant=fixed] + sesoi",
    }
    for (name, claim_id), premise in dense.items():
        assert premise in premises(name, claim_id), name
    assert FAR in premises("as-fig3", "adaptive-bits")
