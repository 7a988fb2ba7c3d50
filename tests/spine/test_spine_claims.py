import pandas as pd
import pytest

from repro.config import claims

RUNS = pd.DataFrame(
    [
        {"model.span.kind": k, "model.span.limit": s, "status": "finished", "valid_bits": b, "avg_span": a}
        for k, s, b, a in [
            ("fixed", 256, 1.10, 256),
            ("fixed", 1024, 1.08, 1024),
            ("adaptive", 256, 1.09, 80),
            ("adaptive", 1024, 1.07, 120),
        ]
    ]
)
KEYS = ["model.span.kind", "model.span.limit"]


def test_scalar_selection_and_arithmetic():
    v = claims.evaluate("avg_span[span.kind=adaptive, span.limit=1024] < 0.25 * 1024", RUNS, KEYS)
    assert v.status == "reproduced" and "120" in v.detail
    assert claims.evaluate("avg_span[kind=adaptive, limit=1024] > 200", RUNS, KEYS).status == "not reproduced"


def test_series_compare_cell_by_cell():
    assert claims.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", RUNS, KEYS).status == "reproduced"
    worse = RUNS.copy()
    worse.loc[3, "valid_bits"] = 1.09  # adaptive loses at S=1024 only
    assert (
        claims.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", worse, KEYS).status == "not reproduced"
    )
    assert claims.evaluate("mean(avg_span[kind=adaptive]) < 200", RUNS, KEYS).status == "reproduced"


def test_missing_or_unfinished_runs_are_not_evaluable():
    assert claims.evaluate("valid_bits[kind=dynamic] < 2", RUNS, KEYS).status == "not evaluable"
    running = RUNS.assign(status=["finished", "running", "finished", "finished"])
    assert claims.evaluate("valid_bits[kind=fixed] > 1", running, KEYS).status == "not evaluable"


@pytest.mark.parametrize("check", ["valid_bits[kind=fixed", "__import__('os')", "valid_bits[kind] < 1", "x < 1"])
def test_bad_checks_are_refused(check):
    with pytest.raises(claims.ClaimError):
        claims.parse(check)


# A store where the paper's claims hold trivially: the adaptive spans never left their initial z = 0
# (span_max < R) and the fixed baseline gets worse with more context (under-trained).
TRIVIAL = pd.DataFrame(
    [
        {
            "model.span.kind": k,
            "model.span.limit": s,
            "model.span.ramp": 32,
            "status": "finished",
            "valid_bits": b,
            "avg_span": a,
            "span_max": z,
            "unigram_bits": 4.1,
        }
        for k, s, b, a, z in [
            ("fixed", 64, 2.49, 64, 64),
            ("fixed", 512, 2.89, 512, 512),
            ("adaptive", 64, 2.40, 32.5, 0.4),
            ("adaptive", 512, 2.41, 32.6, 0.6),
        ]
    ]
)
MOVED = "span_max[kind=adaptive] >= model.span.ramp[kind=adaptive]"
USES_CONTEXT = "last(valid_bits[kind=fixed]) <= first(valid_bits[kind=fixed])"
ADAPTIVE_WINS = "valid_bits[kind=adaptive] <= valid_bits[kind=fixed]"


def test_a_claim_that_holds_only_trivially_is_not_evaluable():
    assert claims.evaluate(ADAPTIVE_WINS, TRIVIAL, KEYS).status == "reproduced"  # without preconditions
    verdict = claims.evaluate(ADAPTIVE_WINS, TRIVIAL, KEYS, [MOVED, USES_CONTEXT])
    assert verdict.status == "not evaluable"
    assert MOVED in verdict.detail and "does not hold" in verdict.detail and "0.6" in verdict.detail
    moved = TRIVIAL.assign(span_max=[64, 512, 40.0, 90.0])
    verdict = claims.evaluate(ADAPTIVE_WINS, moved, KEYS, [MOVED, USES_CONTEXT])
    assert verdict.status == "not evaluable" and USES_CONTEXT in verdict.detail and "2.89" in verdict.detail
    trained = moved.assign(valid_bits=[2.49, 2.30, 2.40, 2.28])
    assert claims.evaluate(ADAPTIVE_WINS, trained, KEYS, [MOVED, USES_CONTEXT]).status == "reproduced"
    assert claims.evaluate("valid_bits[kind=adaptive] < 2", trained, KEYS, [MOVED]).status == "not reproduced"


def test_a_precondition_that_cannot_be_checked_makes_the_claim_not_evaluable():
    verdict = claims.evaluate(
        ADAPTIVE_WINS, TRIVIAL.drop(columns="unigram_bits"), KEYS, ["max(valid_bits[]) < 0.8 * min(unigram_bits[])"]
    )
    assert verdict.status == "not evaluable" and "cannot be checked" in verdict.detail


def test_first_and_last_follow_grid_order():
    assert (
        claims.evaluate("first(avg_span[kind=fixed]) < last(avg_span[kind=fixed])", TRIVIAL, KEYS).status
        == "reproduced"
    )


def test_two_runs_in_one_cell_are_never_paired_by_position():
    doubled = pd.concat([TRIVIAL, TRIVIAL.iloc[[1]].assign(valid_bits=2.0)], ignore_index=True)
    verdict = claims.evaluate(ADAPTIVE_WINS, doubled, KEYS)
    assert verdict.status == "not evaluable" and "share a cell" in verdict.detail


TIMED = RUNS.assign(seconds_per_step=[0.30, 0.35, 0.20, 0.25], ran_alone=True, load_average_max=2.1, cpus=2)
FASTER = "seconds_per_step[kind=adaptive] < seconds_per_step[kind=fixed]"


def test_timing_claims_count_only_runs_that_ran_alone():
    assert claims.evaluate(FASTER, TIMED, KEYS).status == "reproduced"
    loaded = TIMED.assign(ran_alone=[True, True, False, True], load_average_max=[2.1, 2.1, 4.3, 2.1])
    verdict = claims.evaluate(FASTER, loaded, KEYS)
    assert verdict.status == "not evaluable" and "1 of 2 run(s) shared the machine" in verdict.detail
    assert "4.30 on 2 cores" in verdict.detail
    older = TIMED.drop(columns=["ran_alone"])  # stored before the load was recorded
    verdict = claims.evaluate(FASTER, older, KEYS)
    assert verdict.status == "not evaluable" and "no load record" in verdict.detail
    # replicates: a seed whose timed runs did not run alone is left out, the others judge the claim
    seeds = pd.concat(
        [older.assign(**{claims.SEED: 0}), TIMED.assign(**{claims.SEED: 1}), TIMED.assign(**{claims.SEED: 2})]
    )
    verdict = claims.evaluate(
        FASTER, seeds.assign(seconds_per_step=[0.3, 0.35, 0.2, 0.25] * 2 + [0.3, 0.36, 0.2, 0.26]), KEYS
    )
    assert verdict.status == "reproduced" and verdict.seeds == 2
    # a claim on other metrics of the same runs is judged as before
    assert claims.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", loaded, KEYS).status == "reproduced"


def _replicated(cells: dict[str, list[float]], metric: str = "valid_bits") -> pd.DataFrame:
    """Runs of cells ``kind=...`` with one value per seed (seed i's value at index i)."""
    return pd.DataFrame(
        [
            {"model.span.kind": kind, "train.seed": seed, "status": "finished", metric: values[seed]}
            for seed in range(max(len(v) for v in cells.values()))
            for kind, values in cells.items()
            if seed < len(values)
        ]
    )


WINS = "valid_bits[kind=adaptive] < valid_bits[kind=fixed]"


def test_cells_that_differ_by_less_than_their_seed_spread_are_within_noise():
    # adaptive is 0.01 better on the means, but the seeds disagree by +-0.05 about it
    runs = _replicated({"adaptive": [2.30, 2.25, 2.38], "fixed": [2.26, 2.33, 2.37]})
    verdict = claims.evaluate(WINS, runs, ["model.span.kind"])
    assert verdict.status == "within noise" and verdict.seeds == 3
    assert (
        "2.31 ± 0.066" in verdict.detail
        and "margin +0.01 (SE 0.036)" in verdict.detail
        and "n = 3 seeds, paired" in verdict.detail
    )
    # one seed alone would have said "not reproduced", and says it was judged on one seed
    alone = claims.evaluate(WINS, runs[runs["train.seed"] == 0], ["model.span.kind"])
    assert alone.status == "not reproduced" and "judged on one seed" in alone.detail


def test_a_paired_difference_beyond_two_standard_errors_decides():
    # the seeds move both cells together (a large spread of the means) but adaptive wins by 0.02 in each pair
    runs = _replicated({"adaptive": [2.28, 2.38, 2.18], "fixed": [2.30, 2.40, 2.20]})
    assert claims.evaluate(WINS, runs, ["model.span.kind"]).status == "reproduced"
    losing = _replicated({"adaptive": [2.32, 2.42, 2.22], "fixed": [2.30, 2.40, 2.21]})
    assert claims.evaluate(WINS, losing, ["model.span.kind"]).status == "not reproduced"


def test_thresholds_and_preconditions_apply_to_the_seed_means():
    runs = _replicated({"adaptive": [30.0, 40.0, 80.0]}, metric="span_max")
    keys = ["model.span.kind"]
    assert claims.evaluate("span_max[kind=adaptive] >= 45", runs, keys).status == "within noise"  # mean 50
    assert claims.evaluate("span_max[kind=adaptive] >= 10", runs, keys).status == "reproduced"
    gated = claims.evaluate("span_max[kind=adaptive] < 1000", runs, keys, ["span_max[kind=adaptive] >= 45"])
    assert gated.status == "reproduced"  # the precondition holds on the mean (50), although seed 0 has 30
    gated = claims.evaluate("span_max[kind=adaptive] < 1000", runs, keys, ["span_max[kind=adaptive] >= 60"])
    assert gated.status == "not evaluable"


def test_only_seeds_that_complete_the_claim_are_paired():
    runs = _replicated({"adaptive": [2.28, 2.38, 2.18], "fixed": [2.30, 2.40]})  # fixed's seed 2 not run yet
    verdict = claims.evaluate(WINS, runs, ["model.span.kind"])
    assert verdict.seeds == 2 and "n = 2 seeds" in verdict.detail


def test_a_manifest_without_a_grid_pairs_its_seeds_too():
    runs = pd.DataFrame(
        [{"train.seed": i, "status": "finished", "test_bits": b} for i, b in enumerate([3.2, 3.3, 3.1])]
    )
    verdict = claims.evaluate("test_bits[] < 4", runs, [])
    assert verdict.status == "reproduced" and verdict.seeds == 3 and "3.2 ± 0.1" in verdict.detail


def test_cells_named_by_a_dict_value_are_paired_by_seed():
    """st-table4's cells are `data={...}` dicts: the seed means must keep the cell's own value, or the
    per-seed rows no longer line up with them (sd nan), and a nan spread let the sign alone decide."""
    runs = pd.DataFrame(
        [
            {"data": {"name": "audio", "seq_len": n}, "train.seed": seed, "status": "finished", "valid_bits": b}
            for seed, bits in enumerate([(7.9, 7.3), (8.2, 7.4), (7.8, 7.2)])
            for n, b in zip((1024, 4096), bits)
        ]
    )
    verdict = claims.evaluate("max(valid_bits[]) < 8", runs, ["data"])
    assert "nan" not in verdict.detail and "7.967 ± 0.21" in verdict.detail
    assert verdict.status == "within noise"  # 1024's mean 7.97 is below 8 by less than two standard errors
