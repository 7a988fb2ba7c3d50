import pandas as pd
import pytest

from repro import claims

RUNS = pd.DataFrame([
    {"model.span.kind": k, "model.span.limit": s, "status": "finished", "valid_bits": b, "avg_span": a}
    for k, s, b, a in [("fixed", 256, 1.10, 256), ("fixed", 1024, 1.08, 1024),
                       ("adaptive", 256, 1.09, 80), ("adaptive", 1024, 1.07, 120)]
])
KEYS = ["model.span.kind", "model.span.limit"]


def test_scalar_selection_and_arithmetic():
    v = claims.evaluate("avg_span[span.kind=adaptive, span.limit=1024] < 0.25 * 1024", RUNS, KEYS)
    assert v.status == "reproduced" and "120" in v.detail
    assert claims.evaluate("avg_span[kind=adaptive, limit=1024] > 200", RUNS, KEYS).status == "not reproduced"


def test_series_compare_cell_by_cell():
    assert claims.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", RUNS, KEYS).status == "reproduced"
    worse = RUNS.copy()
    worse.loc[3, "valid_bits"] = 1.09  # adaptive loses at S=1024 only
    assert claims.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", worse, KEYS).status == "not reproduced"
    assert claims.evaluate("mean(avg_span[kind=adaptive]) < 200", RUNS, KEYS).status == "reproduced"


def test_missing_or_unfinished_runs_are_not_evaluable():
    assert claims.evaluate("valid_bits[kind=dynamic] < 2", RUNS, KEYS).status == "not evaluable"
    running = RUNS.assign(status=["finished", "running", "finished", "finished"])
    assert claims.evaluate("valid_bits[kind=fixed] > 1", running, KEYS).status == "not evaluable"


@pytest.mark.parametrize("check", ["valid_bits[kind=fixed", "__import__('os')", "valid_bits[kind] < 1", "x < 1"])
def test_bad_checks_are_refused(check):
    with pytest.raises(claims.ClaimError):
        claims.parse(check)
