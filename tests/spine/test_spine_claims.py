import pandas as pd
import pytest

from repro.claims import gates, power, stats
from repro.claims import verdict as verdicts
from repro.claims.select import SEED, seed_means
from repro.grammar import language as claims


def said(verdict: verdicts.Verdict) -> str:
    """What a one-seed verdict indicates: it is never called reproduced or not."""
    assert verdict.status == verdicts.INDICATIVE and verdict.seeds == 1, verdict
    return "holds" if verdict.holds else "fails"


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
    v = gates.evaluate("avg_span[span.kind=adaptive, span.limit=1024] < 0.25 * 1024", RUNS, KEYS)
    assert said(v) == "holds" and "120" in v.detail
    assert said(gates.evaluate("avg_span[kind=adaptive, limit=1024] > 200", RUNS, KEYS)) == "fails"


def test_series_compare_cell_by_cell():
    assert said(gates.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", RUNS, KEYS)) == "holds"
    worse = RUNS.copy()
    worse.loc[3, "valid_bits"] = 1.09  # adaptive loses at S=1024 only
    assert said(gates.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", worse, KEYS)) == "fails"
    assert said(gates.evaluate("mean(avg_span[kind=adaptive]) < 200", RUNS, KEYS)) == "holds"


def test_missing_or_unfinished_runs_are_not_evaluable():
    assert gates.evaluate("valid_bits[kind=dynamic] < 2", RUNS, KEYS).status == "not evaluable"
    running = RUNS.assign(status=["finished", "running", "finished", "finished"])
    assert gates.evaluate("valid_bits[kind=fixed] > 1", running, KEYS).status == "not evaluable"


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
    assert said(gates.evaluate(ADAPTIVE_WINS, TRIVIAL, KEYS)) == "holds"  # without preconditions
    verdict = gates.evaluate(ADAPTIVE_WINS, TRIVIAL, KEYS, [MOVED, USES_CONTEXT])
    assert verdict.status == "not evaluable" and verdict.failed == [MOVED, USES_CONTEXT]
    assert "0.6" in gates.precondition(MOVED, TRIVIAL, KEYS).detail
    moved = TRIVIAL.assign(span_max=[64, 512, 40.0, 90.0])
    verdict = gates.evaluate(ADAPTIVE_WINS, moved, KEYS, [MOVED, USES_CONTEXT])
    assert verdict.status == "not evaluable" and verdict.failed == [USES_CONTEXT] and USES_CONTEXT in verdict.detail
    trained = moved.assign(valid_bits=[2.49, 2.30, 2.40, 2.28])
    assert said(gates.evaluate(ADAPTIVE_WINS, trained, KEYS, [MOVED, USES_CONTEXT])) == "holds"
    assert said(gates.evaluate("valid_bits[kind=adaptive] < 2", trained, KEYS, [MOVED])) == "fails"


def test_a_precondition_that_cannot_be_checked_makes_the_claim_not_evaluable():
    verdict = gates.evaluate(
        ADAPTIVE_WINS, TRIVIAL.drop(columns="unigram_bits"), KEYS, ["max(valid_bits[]) < 0.8 * min(unigram_bits[])"]
    )
    assert verdict.status == "not evaluable" and verdict.failed == ["max(valid_bits[]) < 0.8 * min(unigram_bits[])"]


def test_first_and_last_follow_grid_order():
    assert said(gates.evaluate("first(avg_span[kind=fixed]) < last(avg_span[kind=fixed])", TRIVIAL, KEYS)) == "holds"


def test_two_runs_in_one_cell_are_never_paired_by_position():
    doubled = pd.concat([TRIVIAL, TRIVIAL.iloc[[1]].assign(valid_bits=2.0)], ignore_index=True)
    verdict = gates.evaluate(ADAPTIVE_WINS, doubled, KEYS)
    assert verdict.status == "not evaluable" and "share a cell" in verdict.detail


TIMED = RUNS.assign(seconds_per_step=[0.30, 0.35, 0.20, 0.25], ran_alone=True, load_average_max=2.1, cpus=2)
FASTER = "seconds_per_step[kind=adaptive] < seconds_per_step[kind=fixed]"


def test_timing_claims_count_only_runs_that_ran_alone():
    assert said(gates.evaluate(FASTER, TIMED, KEYS)) == "holds"
    loaded = TIMED.assign(ran_alone=[True, True, False, True], load_average_max=[2.1, 2.1, 4.3, 2.1])
    verdict = gates.evaluate(FASTER, loaded, KEYS)
    assert verdict.status == "not evaluable" and "1 of 2 run(s) shared the machine" in verdict.detail
    assert "4.30 on 2 cores" in verdict.detail
    stolen = loaded.assign(others_cores_max=[0.1, 0.1, 0.7, 0.1], steal_cores_max=[0.0, 0.0, 0.6, 0.0])
    detail = gates.evaluate(FASTER, stolen, KEYS).detail  # no process of its own: the host's other guests
    assert "up to 0.70 of 2 cores busy, the hypervisor's steal up to 0.60" in detail
    older = TIMED.drop(columns=["ran_alone"])  # stored before the load was recorded
    verdict = gates.evaluate(FASTER, older, KEYS)
    assert verdict.status == "not evaluable" and "no load record" in verdict.detail
    # replicates: a seed whose timed runs did not run alone is left out, the others judge the claim
    seeds = pd.concat([older.assign(**{SEED: 0}), TIMED.assign(**{SEED: 1}), TIMED.assign(**{SEED: 2})])
    verdict = gates.evaluate(
        FASTER, seeds.assign(seconds_per_step=[0.3, 0.35, 0.2, 0.25] * 2 + [0.3, 0.36, 0.2, 0.26]), KEYS
    )
    assert verdict.status == "reproduced" and verdict.seeds == 2, verdict.detail
    # a claim on other metrics of the same runs is judged as before
    assert said(gates.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", loaded, KEYS)) == "holds"


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
    verdict = gates.evaluate(WINS, runs, ["model.span.kind"])
    assert verdict.status == "within noise" and verdict.seeds == 3
    assert (
        "2.31 ± 0.066" in verdict.detail and "margin +0.01 [" in verdict.detail and "3 seeds, paired" in verdict.detail
    )
    # one seed alone indicates a loss, and is never called "not reproduced"
    alone = gates.evaluate(WINS, runs[runs["train.seed"] == 0], ["model.span.kind"])
    assert said(alone) == "fails" and "one seed" in alone.detail


def test_a_paired_difference_beyond_two_standard_errors_decides():
    # the seeds move both cells together (a large spread of the means) but adaptive wins by 0.02 in each pair
    runs = _replicated({"adaptive": [2.28, 2.38, 2.18], "fixed": [2.30, 2.40, 2.20]})
    assert gates.evaluate(WINS, runs, ["model.span.kind"]).status == "reproduced"
    losing = _replicated({"adaptive": [2.32, 2.42, 2.22], "fixed": [2.30, 2.40, 2.21]})
    assert gates.evaluate(WINS, losing, ["model.span.kind"]).status == "not reproduced"


def test_thresholds_apply_to_the_seed_means_and_preconditions_to_every_seed():
    runs = _replicated({"adaptive": [30.0, 40.0, 80.0]}, metric="span_max")
    keys = ["model.span.kind"]
    assert gates.evaluate("span_max[kind=adaptive] >= 45", runs, keys).status == "within noise"  # mean 50
    assert gates.evaluate("span_max[kind=adaptive] > 0", runs, keys).status == "reproduced"
    # the precondition holds on the mean (50), but seed 0 has 30: a gate must hold on every seed
    gate = "span_max[kind=adaptive] >= 45"
    gated = gates.evaluate("span_max[kind=adaptive] < 1000", runs, keys, [gate])
    assert gated.status == "not evaluable" and gated.failed == [gate]
    assert "fails on seeds 0, 1 of 3" in gates.precondition(gate, runs, keys).detail
    gated = gates.evaluate("span_max[kind=adaptive] < 1000", runs, keys, ["span_max[kind=adaptive] >= 25"])
    assert gated.status == "reproduced"


def test_only_seeds_that_complete_the_claim_are_paired():
    runs = _replicated({"adaptive": [2.28, 2.38, 2.18], "fixed": [2.30, 2.40]})  # fixed's seed 2 not run yet
    verdict = gates.evaluate(WINS, runs, ["model.span.kind"])
    assert verdict.seeds == 2 and "2 seeds, paired" in verdict.detail


@pytest.mark.parametrize("stored", ["NaN", True, "2.4 bits"])
def test_a_seed_whose_stored_value_is_no_number_is_dropped_and_named(stored):
    """complete_seeds counted a seed complete whose value was stored but is no number (text "NaN", a
    boolean), so the whole claim was not evaluable although two seeds complete it. Now that seed is left
    out, by the same check as a selection's (repro.store.usable.fault), and named with why: in the claim's
    `dropped` and in its precondition's detail."""
    runs = _replicated({"adaptive": [2.28, 2.38, 2.18], "fixed": [2.30, 2.40, 2.20]}).astype({"valid_bits": object})
    runs.loc[(runs["train.seed"] == 2) & (runs["model.span.kind"] == "fixed"), "valid_bits"] = stored
    keys = ["model.span.kind"]
    said = f"seed 2 dropped: metric 'valid_bits' of a run of valid_bits[kind=fixed] is {str(stored)!r}, not a number"
    verdict = gates.evaluate(WINS, runs, keys)
    assert verdict.status == "reproduced" and verdict.seeds == 2 and verdict.dropped == [said], verdict.detail
    gate = gates.precondition("valid_bits[] < 3", runs, keys)
    assert gate.status == "reproduced" and gate.seeds == 2 and gate.detail.endswith(said.replace("[kind=fixed]", "[]"))
    assert gates.evaluate(WINS, runs, keys, ["valid_bits[] < 3"]).dropped == [said]  # its own seeds' line only
    alone = runs[runs["train.seed"] == 2]  # no other seed: the selection's own line, not evaluable
    assert gates.evaluate(WINS, alone, keys).detail == said.split(": ", 1)[1]
    unknown = gates.evaluate("valid_bits[size=3] < 3", runs, keys)  # no seed completes a key the grid lacks
    assert unknown.status == "not evaluable" and "filter key 'size' matches 0 grid keys" in unknown.detail


def test_a_gate_on_a_cell_with_fewer_seeds_does_not_cut_the_claims_pairs():
    # dynamic, which the claim does not compare, has one seed; a manifest-wide gate names it too
    runs = _replicated({"adaptive": [2.28, 2.38, 2.18], "fixed": [2.30, 2.40, 2.20], "dynamic": [2.5]})
    gate = "valid_bits[] < 3"
    verdict = gates.evaluate(WINS, runs, ["model.span.kind"], [gate])
    assert verdict.status == "reproduced" and verdict.seeds == 3, verdict.detail
    # the gate is still judged, on the seeds that complete it (here seed 0 alone), and still gates
    assert gates.precondition(gate, runs, ["model.span.kind"]).seeds == 1
    assert gates.evaluate(WINS, runs, ["model.span.kind"], ["valid_bits[] < 2.4"]).status == "not evaluable"


def test_a_manifest_without_a_grid_pairs_its_seeds_too():
    runs = pd.DataFrame(
        [{"train.seed": i, "status": "finished", "test_bits": b} for i, b in enumerate([3.2, 3.3, 3.1])]
    )
    verdict = gates.evaluate("test_bits[] < 4", runs, [])
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
    verdict = gates.evaluate("max(valid_bits[]) < 8", runs, ["data"])
    assert "nan" not in verdict.detail and "7.967 ± 0.21" in verdict.detail
    assert verdict.status == "within noise"  # 1024's mean 7.97 is below 8 by less than two standard errors


def _margins(margins: list[float]) -> pd.DataFrame:
    """Two cells whose per-seed margin (fixed - adaptive) is ``margins[i]`` at seed i."""
    return _replicated({"adaptive": [2.0] * len(margins), "fixed": [2.0 + m for m in margins]})


@pytest.mark.parametrize(
    ("n", "se_multiple", "confidence", "status"),
    [
        (3, 2.5, 0.95, "within noise"),  # t(0.95, 2) = 2.92: 2.5 SE is not enough at 3 seeds
        (3, 5.0, 0.95, "reproduced"),
        (3, -5.0, 0.95, "not reproduced"),
        (3, 2.5, 0.80, "reproduced"),  # t(0.80, 2) = 1.06
        (2, 5.0, 0.95, "within noise"),  # t(0.95, 1) = 6.31
        (2, 7.0, 0.95, "reproduced"),
        (2, -7.0, 0.95, "not reproduced"),
        (5, 2.5, 0.95, "reproduced"),  # t(0.95, 4) = 2.13
    ],
)
def test_a_directional_claim_needs_its_one_sided_t_bound_to_clear_zero(n, se_multiple, confidence, status):
    noise = [i - (n - 1) / 2 for i in range(n)]  # a spread of its own, mean 0
    sd = pd.Series(noise).std(ddof=1)
    scale = 0.01 / sd  # per-seed margins with sd 0.01 exactly
    se = 0.01 / n**0.5
    runs = _margins([se_multiple * se + scale * e for e in noise])
    verdict = gates.evaluate(WINS, runs, ["model.span.kind"], confidence=confidence)
    assert verdict.status == status and verdict.seeds == n, verdict.detail
    (margin,) = verdict.margins
    half = stats.t_quantile(confidence, n - 1) * se
    assert margin.mean == pytest.approx(se_multiple * se) and margin.lower == pytest.approx(margin.mean - half)


def test_one_seed_is_indicative_in_either_direction_and_counted_apart():
    for margin, direction in ((0.3, "holds"), (-0.3, "fails")):
        verdict = gates.evaluate(WINS, _margins([margin]), ["model.span.kind"])
        assert said(verdict) == direction and verdict.effect == f"{margin:+.3g}, 1 seed"


def test_a_band_is_judged_by_two_one_sided_tests():
    near = "abs(valid_bits[kind=adaptive] - valid_bits[kind=fixed]) < 0.05"
    # differences 0.01 +- 0.005 over 3 seeds: the 90% interval (TOST at 5%) lies inside +-0.05
    assert gates.evaluate(near, _margins([0.005, 0.01, 0.015]), ["model.span.kind"]).status == "reproduced"
    # 0.2 apart in every seed: wholly outside the band
    assert gates.evaluate(near, _margins([0.19, 0.2, 0.21]), ["model.span.kind"]).status == "not reproduced"
    # 0.04 +- 0.02: the interval [-0.01, 0.09] straddles the band's edge
    verdict = gates.evaluate(near, _margins([0.02, 0.04, 0.06]), ["model.span.kind"])
    assert verdict.status == "within noise" and verdict.margins[0].band == 0.05
    t1 = stats.t_quantile(0.95, 2)  # one-sided 95%: the ends of the two-sided 90% interval
    assert verdict.margins[0].upper == pytest.approx(-0.04 + t1 * 0.02 / 3**0.5)  # x = adaptive - fixed
    assert verdict.effect.startswith("-0.04 [") and "across the edge of ±0.05" in verdict.effect
    # the TOST's p is the larger of its two one-sided p values, and decides as the interval does
    p = verdict.margins[0].p_holds
    assert p > 0.05 and gates.evaluate(near, _margins([0.005, 0.01, 0.015]), ["model.span.kind"]).p < 0.05
    # 0.045 +- 0.001: the 95% two-sided interval would cross 0.05, the TOST's 90% one does not
    tight = gates.evaluate(near, _margins([0.044, 0.045, 0.046]), ["model.span.kind"])
    assert tight.status == "reproduced" and "inside ±0.05" in tight.effect


RAMP_MANIFEST = """
name: ramp-trivial
title: a ramp ablation written the way the docs show
paper: adaptive_span
base:
  data: {name: wiki-lead8, block: 64}
  model: {family: adaptive_span, layers: 2, d_model: 32, d_ff: 64, heads: 2, span: {kind: adaptive, limit: 256, ramp: 32}}
  train: {steps: 150, batch_size: 4}
grid: {model.span.ramp: [16, 64]}
claims:
  - id: wider
    text: a wider ramp gives a longer span
    check: "avg_span[ramp=64] > avg_span[ramp=16]"
"""


def test_a_span_claim_gets_no_knife_edge_gate_but_the_initial_span_control_still_applies(tmp_path):
    """``moved`` (span_max >= R and avg_span >= 1.25 R) is retired: no precondition is added to a span claim,
    and a claim that holds by construction at z = 0 is caught by the initial-span control instead."""
    from repro.config import manifest as manifests

    path = tmp_path / "ramp-trivial.yaml"
    path.write_text(RAMP_MANIFEST)
    m = manifests.load(path)
    (claim,) = m.claims
    assert claim.requires == [] and claim.controls == []
    assert any("can hold by construction" in w for w in m.claim_warnings())
    runs = pd.DataFrame(
        [
            {"model.span.ramp": r, "model.span.kind": "adaptive", "span_limit": 256, "status": "finished"}
            | {"avg_span": a, "span_max": z}
            for r, a, z in [(16, 16.9, 0.9), (64, 69.3, 5.3)]
        ]
    )
    verdict = gates.evaluate(claim.check, runs, ["model.span.ramp"], claim.requires)
    assert verdict.status == "not evaluable" and verdict.control == "initial-span control", verdict
    assert "holds at the initial spans too" in verdict.detail
    with pytest.raises(manifests.ManifestError, match="metric 'moved'"):
        path.write_text(RAMP_MANIFEST + "    requires: ['moved[ramp=16]']\n")
        manifests.load(path)


def test_the_initial_span_control_passes_a_claim_against_a_lambda_zero_control():
    """Both arms start at R: the penalty shortening the span cannot hold at z = 0, so it is judged."""
    runs = _replicated({"0.0": [120.0, 130.0, 125.0], "2e-06": [60.0, 62.0, 58.0]}, metric="avg_span")
    runs = runs.rename(columns={"model.span.kind": "model.span.loss_coef"})
    runs = runs.assign(**{"model.span.kind": "adaptive", "span_limit": 1024, "model.span.ramp": 32})
    check = "avg_span[loss_coef=2e-06] < avg_span[loss_coef=0.0]"
    assert gates.evaluate(check, runs, ["model.span.loss_coef"]).status == "reproduced"
    # against S it is true by construction (R = 32 < 0.1 S at z = 0): not evaluable
    far = gates.evaluate("avg_span[loss_coef=2e-06] < 0.1 * 1024", runs, ["model.span.loss_coef"])
    assert far.status == "not evaluable" and far.control == "initial-span control"


def test_a_claim_on_a_metric_no_run_stores_is_refused(tmp_path):
    from repro.config import manifest as manifests

    path = tmp_path / "ramp-trivial.yaml"
    path.write_text(RAMP_MANIFEST.replace("avg_span[ramp=64]", "avg_spam[ramp=64]"))
    with pytest.raises(manifests.ManifestError, match=r"claims\[0\]: metric 'avg_spam' .* did you mean avg_span"):
        manifests.load(path)


def test_only_learned_words_make_a_sanity_check():
    assert claims.is_sanity("learned[]") and claims.is_sanity("learned[pattern=fixed] and learned_test[]")
    assert not claims.is_sanity("learned[] and valid_bits[] < 3") and not claims.is_sanity("valid_bits[] < 3")


def test_an_or_claim_shows_the_part_that_decided_it():
    """frontier cpu's adaptive-on-frontier: one part holds clearly, the other is within noise; ``or`` takes
    the strongest, and the headline must show that part, not the weakest."""
    runs = _replicated({"adaptive": [2.0, 2.1, 2.05], "fixed": [2.3, 2.4, 2.35], "dynamic": [2.0, 2.2, 2.0]})
    check = "valid_bits[kind=adaptive] < valid_bits[kind=dynamic] or valid_bits[kind=adaptive] < valid_bits[kind=fixed]"
    verdict = gates.evaluate(check, runs, ["model.span.kind"])
    assert verdict.status == "reproduced" and verdict.decided.comparison == 1, verdict.margins
    assert verdict.effect.startswith("+0.3 [")  # fixed - adaptive: 0.3 on every seed
    both = check.replace(" or ", " and ")
    assert gates.evaluate(both, runs, ["model.span.kind"]).decided.comparison == 0  # and: the weakest


def test_each_verdict_has_its_p_value_and_minimum_detectable_effect():
    verdict = gates.evaluate(WINS, _margins([0.1, 0.3, 0.2]), ["model.span.kind"], sesoi=0.02)
    m = verdict.decided
    se = 0.1 / 3**0.5
    from scipy import stats as sp

    assert m.p_holds == pytest.approx(sp.t.sf(0.2 / se, 2)) and verdict.p == m.p_holds
    assert verdict.p_two_sided == pytest.approx(2 * sp.t.sf(0.2 / se, 2))  # what Holm and BH are fed
    # the exact MDE: the noncentral t reaches 80% power there (t(.95) + t(.8) is the approximation, low)
    crit = sp.t.ppf(0.95, 2)
    assert sp.nct.sf(crit, 2, m.mde / se) == pytest.approx(0.8, abs=1e-6)
    # at 2 seeds the approximation t(.95) + t(.8) is 6% low
    assert stats.detectable(2) == pytest.approx(1.065 * (sp.t.ppf(0.95, 1) + sp.t.ppf(0.8, 1)), rel=0.005)
    strict = stats.detectable(2, confidence=1 - 0.0036 / 2)  # Holm's bar in a family of 14 tests, at 2 seeds
    assert strict > 100 and sp.nct.sf(sp.t.ppf(1 - 0.0036 / 2, 1), 1, strict) == pytest.approx(0.8, abs=1e-6)
    assert verdict.status == "reproduced" and not verdict.uninformative
    assert m.p_sign_flip == pytest.approx(1 / 8)  # all three seeds positive: 1 of the 8 sign assignments


def test_uninformative_is_judged_against_the_claims_smallest_effect_of_interest():
    """Within noise, |m| <= t SE < MDE always: "uninformative" against the margin itself tagged every such
    verdict by construction. Against a declared smallest effect it says whether these seeds could tell."""
    noisy = _margins([0.06, -0.05, 0.005])
    coarse = gates.evaluate(WINS, noisy, ["model.span.kind"], sesoi=0.5)
    assert coarse.status == "within noise" and not coarse.uninformative
    fine = gates.evaluate(WINS, noisy, ["model.span.kind"], sesoi=0.02)
    assert fine.uninformative and "MDE" in fine.effect and "> 0.02" in fine.effect
    # none declared: the metric's default (0.02 bits), filled where the verdict is judged
    assert gates.evaluate(WINS, noisy, ["model.span.kind"]).sesoi == 0.02
    from repro.claims.power import default_sesoi

    assert default_sesoi(WINS) == 0.02 and default_sesoi("avg_span[kind=adaptive] < 100") == 4.0


def test_a_band_states_its_tost_power_with_t95_plus_t90():
    from scipy import stats as sp

    runs = _replicated({"adaptive": [2.0, 2.0, 2.0], "fixed": [2.01, 1.99, 2.03]})
    band = gates.evaluate("abs(valid_bits[kind=adaptive] - valid_bits[kind=fixed]) < 0.5", runs, ["model.span.kind"])
    se = float(pd.Series([-0.01, 0.01, -0.03]).std()) / 3**0.5
    assert band.decided.mde == pytest.approx((sp.t.ppf(0.95, 2) + sp.t.ppf(0.9, 2)) * se)


def test_an_or_is_bonferroni_corrected_inside_the_claim():
    """Two parts, each at p ~ 0.03: alone each would read reproduced; "at least one of two" at 5% needs
    p < 0.025 from one of them (the minimum p uncorrected has a 2 x alpha error)."""
    from scipy import stats as sp

    se = 1.0
    m = sp.t.ppf(1 - 0.035, 2) * se  # p = 0.035
    seeds = [m - 3**0.5, m, m + 3**0.5]  # sd 3**0.5 -> SE 1
    runs = _replicated({"adaptive": [0.0] * 3, "fixed": seeds, "dynamic": seeds})
    one = gates.evaluate(WINS, runs, ["model.span.kind"])
    assert one.status == "reproduced" and one.p == pytest.approx(0.035, rel=1e-6)
    either = WINS + " or valid_bits[kind=adaptive] < valid_bits[kind=dynamic]"
    judged = gates.evaluate(either, runs, ["model.span.kind"])
    assert judged.status == "within noise" and judged.p_holds == pytest.approx(0.07, rel=1e-6)
    # and the failing side of an and likewise: one part failing at p = 0.035 of two is not a refutation
    flipped = runs.assign(fixed=0.0)
    flipped["valid_bits"] = [
        -v if k != "adaptive" else 0.0 for k, v in zip(runs["model.span.kind"], runs["valid_bits"])
    ]
    flipped.loc[flipped["model.span.kind"] == "dynamic", "valid_bits"] = 5.0
    both = WINS + " and valid_bits[kind=adaptive] < valid_bits[kind=dynamic]"
    assert gates.evaluate(WINS, flipped, ["model.span.kind"]).status == "not reproduced"
    assert gates.evaluate(both, flipped, ["model.span.kind"]).status == "within noise"


def test_an_or_with_a_cost_part_is_a_cost_check():
    assert claims.kind("flops_per_token[kind=a] < flops_per_token[kind=b]") == claims.COST
    assert claims.kind("valid_bits[kind=a] < valid_bits[kind=b] or params[kind=a] < params[kind=b]") == claims.COST
    assert claims.kind("valid_bits[kind=a] < valid_bits[kind=b] and params[kind=a] < params[kind=b]") == claims.FINDING
    assert claims.kind("learned[]") == claims.SANITY


def test_a_claim_on_max_is_centred_on_the_mean_of_its_per_seed_margins():
    """max over cells of the seed means is not the mean over seeds of each seed's max: the interval is
    built from the per-seed values, so it must be centred on their mean (st-ablate-stride's -0.318 vs -0.337)."""
    runs = pd.DataFrame(
        [
            {"model.span.kind": k, "train.seed": seed, "status": "finished", "valid_bits": v}
            for seed, values in enumerate([(1.0, 2.0), (2.0, 1.0), (1.5, 1.5)])
            for k, v in zip(("a", "b"), values)
        ]
    )
    verdict = gates.evaluate("max(valid_bits[]) < 3", runs, ["model.span.kind"])
    per_seed = [3 - 2.0, 3 - 2.0, 3 - 1.5]
    assert verdict.decided.mean == pytest.approx(sum(per_seed) / 3)  # not 3 - max(1.5, 1.5) = 1.5


def _curve(bits: list[float], every: int = 50) -> pd.DataFrame:
    return pd.DataFrame({"step": [every * (i + 1) - 1 for i in range(len(bits))], "train/bits": bits})


def _curves(adaptive, fixed):
    """A loader for the runs of :func:`_margins` with ids: seed i's adaptive run "a<i>", fixed "f<i>"."""
    table = {
        **{f"a{i}": _curve(c) for i, c in enumerate(adaptive)},
        **{f"f{i}": _curve(c) for i, c in enumerate(fixed)},
    }
    return table.get


def _with_ids(runs: pd.DataFrame) -> pd.DataFrame:
    return runs.assign(run_id=[f"{k[0]}{s}" for k, s in zip(runs["model.span.kind"], runs["train.seed"])])


def test_a_bits_verdict_keeps_its_sign_along_the_paired_curves_or_is_not_evaluable():
    runs = _with_ids(_margins([0.1, 0.12, 0.11]))
    steps = range(1, 21)
    fixed = [[3.0 / s**0.3 + 0.1 for s in steps]] * 3
    adaptive = [[3.0 / s**0.3 for s in steps]] * 3
    held = gates.evaluate(WINS, runs, ["model.span.kind"], curves=_curves(adaptive, fixed))
    assert held.status == "reproduced" and any("trajectory" in h and "mean of 3 seeds" in h for h in held.held)
    # a missing curve: not evaluable (the old gate passed it silently)
    missing = gates.evaluate(WINS, runs, ["model.span.kind"], curves=lambda run: None)
    assert (
        missing.status == "not evaluable" and missing.control == "trajectory" and "no learning curve" in missing.detail
    )
    # one noisy checkpoint on one seed, against the verdict, no longer stops it (the old gate's knife edge):
    # the seeds' margins, read at 1.5 x the steps, stay on the claim's side
    late = [list(a) for a in adaptive]
    late[1][-3] = fixed[1][-3] + 0.2
    noisy = gates.evaluate(WINS, runs, ["model.span.kind"], curves=_curves(late, fixed))
    assert noisy.status == "reproduced" and any("mean of 3 seeds" in h for h in noisy.held), noisy
    # a baseline catching up: each seed's margin falls along log-steps to reach 0 at 1.5 x the steps
    # (slightly differently per seed), so the margin read there cannot be told from the baseline's side
    import math

    def catching(lag: float) -> list[float]:
        end = math.log(1.5 * 20)
        return [3.0 / s**0.3 + 0.1 * (end - math.log(s)) / (end - math.log(1)) * (1 + lag) - 0.004 * lag for s in steps]

    crossed = gates.evaluate(
        WINS, runs, ["model.span.kind"], curves=_curves(adaptive, [catching(x) for x in (-1, 0, 1)])
    )
    assert crossed.status == "not evaluable" and crossed.control == "trajectory", crossed
    assert "heads to the baseline's side" in crossed.detail and "t = " in crossed.detail


def test_a_reproduced_claim_stands_only_when_its_controls_are_reproduced():
    """adaptive beats fixed-512, but a fixed S = R window does as well: the claim is not about adaptivity."""
    runs = _replicated({"adaptive": [2.0, 2.02, 2.01], "fixed": [2.2, 2.25, 2.21], "window": [2.0, 2.03, 1.99]})
    control = "valid_bits[kind=adaptive] < valid_bits[kind=window]"
    verdict = gates.evaluate(WINS, runs, ["model.span.kind"], controls=[control])
    assert verdict.status == "not evaluable" and verdict.control == "control" and "within noise" in verdict.detail
    beaten = runs.assign(
        valid_bits=[v + 0.1 * (k == "window") for k, v in zip(runs["model.span.kind"], runs["valid_bits"])]
    )
    held = gates.evaluate(WINS, beaten, ["model.span.kind"], controls=[control])
    assert held.status == "reproduced" and held.held and control in held.held[0]
    untrained = gates.evaluate(WINS, runs[runs["model.span.kind"] != "window"], ["model.span.kind"], controls=[control])
    assert untrained.status == "not evaluable" and "no run matches" in untrained.detail
    # a claim that fails is gated alike: its failing control stops a "not reproduced" too (issue 60)
    lost = gates.evaluate(WINS.replace("<", ">"), runs, ["model.span.kind"], controls=[control])
    assert lost.status == "not evaluable" and lost.control == "control"
    assert "as judged (not reproduced)" in lost.detail
    assert gates.evaluate(WINS.replace("<", ">"), beaten, ["model.span.kind"], controls=[control]).status == (
        "not reproduced"
    )


def test_provenance_drops_the_seeds_whose_arms_ran_other_code_and_judges_the_seeds_left():
    runs = _with_ids(_margins([0.1, 0.12, 0.11])).assign(code_version="abc1234", digest="d0")
    assert gates.evaluate(WINS, runs, ["model.span.kind"]).status == "reproduced"
    # a +dirty arm drops its seed, never the verdict: judged on the two seeds left, the page says why
    dirty = runs.assign(code_version=["abc1234+dirty" if r == "a1" else "abc1234" for r in runs["run_id"]])
    verdict = gates.evaluate(WINS, dirty, ["model.span.kind"])
    assert verdict.status != "not evaluable" and verdict.seeds == 2
    assert len(verdict.dropped) == 1 and "seed 1" in verdict.dropped[0] and "a1" in verdict.dropped[0]
    # code that differs between seeds, never within a pair, drops nothing
    between = runs.assign(code_version=[f"c{s}" for s in runs["train.seed"]])
    assert gates.evaluate(WINS, between, ["model.span.kind"]).dropped == []
    # arms of one seed at two commits: compared by what each arm's spec computes at the other's commit
    mixed = runs.assign(code_version=["def5678" if r.startswith("f") else "abc1234" for r in runs["run_id"]])
    same = gates.evaluate(WINS, mixed, ["model.span.kind"], computes=lambda run, commit: "d0")
    assert same.status == "reproduced" and same.seeds == 3 and same.dropped == []
    differs = gates.evaluate(WINS, mixed, ["model.span.kind"], computes=lambda run, commit: f"{run}@{commit}")
    assert differs.status == "not evaluable" and differs.control == "provenance" and "no seed is left" in differs.detail
    one = gates.evaluate(
        WINS, mixed, ["model.span.kind"], computes=lambda run, commit: "d0" if run.endswith("2") else "other"
    )
    assert one.seeds == 1 and len(one.dropped) == 2


def test_the_claim_packages_keep_their_files_small():
    from pathlib import Path

    import repro.claims
    import repro.grammar

    folders = [Path(package.__file__).parent for package in (repro.claims, repro.grammar)]
    sizes = {f"{p.parent.name}/{p.name}": len(p.read_text().splitlines()) for f in folders for p in f.glob("*.py")}
    assert "grammar/language.py" in sizes and max(sizes.values()) <= 250, sizes


def test_seed_means_of_many_summary_columns_raise_no_performance_warning():
    """A summary has ~100 numeric keys: averaging them column by column fragmented the frame, and
    ``repro report --all`` printed 42 pandas PerformanceWarnings."""
    import warnings

    runs = _replicated({"adaptive": [2.0, 2.1], "fixed": [2.2, 2.3]})
    runs = pd.concat([runs, pd.DataFrame({f"m{i}": [float(i)] * len(runs) for i in range(150)})], axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        means = seed_means(runs, ["model.span.kind"])
    assert list(means["valid_bits"]) == pytest.approx([2.05, 2.25]) and list(means["seeds"]) == [2, 2]
    assert means["m7"].tolist() == [7.0, 7.0] and list(means.columns[:4]) == list(runs.columns[:4])


def test_the_power_note_says_before_a_run_what_its_seeds_can_decide(tmp_path, capsys):
    from scipy import stats

    from repro.claims import stats as stats_mod
    from repro.cli import main

    two = power.power_note(2)
    three = f"(3 seeds: {stats_mod.detectable(3) / 3**0.5:.2f} sd)"
    assert f"clears {stats.t.ppf(0.95, 1) / 2**0.5:.2f} x the sd" in two and three in two
    assert "indicative only" in power.power_note(1)
    assert main(["--results", str(tmp_path), "run", "st-ablate-stride", "--seeds", "2", "--dry-run"]) == 0
    assert two in capsys.readouterr().out


def _copy_store(copy_bits: dict[str, list[float]]) -> pd.DataFrame:
    """The scouting study's copy corpus (docs/probes.md): adaptive wins 0.15 bits on the filler, both arms
    learned the data and the spans moved; ``copy_bits``: each arm's bits on the copied targets per seed
    (blind: 6.0, floor 1.05)."""
    rows = []
    for seed in range(3):
        for kind, bits, span in (("adaptive", 3.10, 60.0), ("fixed", 3.25, 512.0)):
            rows.append(
                {
                    "model.span.kind": kind,
                    "train.seed": seed,
                    "status": "finished",
                    "valid_bits": bits + 0.01 * seed,
                    "unigram_bits": 6.0,
                    "span_max": span,
                    "avg_span": span,
                    "model.span.ramp": 32,
                    "valid_bits.copy": copy_bits[kind][seed],
                    "blind_bits.copy": 6.0,
                    "floor_bits.copy": 1.05,
                }
            )
    return pd.DataFrame(rows)


def test_used_blocks_a_claim_that_holds_while_nothing_long_range_was_learned():
    moved = "span_max[kind=adaptive] >= model.span.ramp[kind=adaptive]"  # the retired gate, written out
    keys, guards = ["model.span.kind"], ["learned[]", moved]
    blind = _copy_store({"adaptive": [6.01, 6.0, 6.02], "fixed": [6.0, 6.03, 6.01]})
    # the old rule: the data learned, the spans moved, adaptive wins: reproduced with nothing copied
    assert gates.evaluate(WINS, blind, keys, guards).status == "reproduced"
    used = [*guards, "used[copy, kind=adaptive]", "used[copy, kind=fixed]"]
    stopped = gates.evaluate(WINS, blind, keys, used)
    assert stopped.status == "not evaluable" and stopped.failed == used[2:]
    # the guard passes once the copies are predicted a quarter of the way from blind to the floor
    copied = _copy_store({"adaptive": [2.0, 2.2, 2.1], "fixed": [4.7, 4.6, 4.5]})
    assert gates.evaluate(WINS, copied, keys, used).status == "reproduced"
    # 4.8 is less than a quarter of the way down from 6.0 (the line is 6.0 - 0.25 * 4.95 = 4.76)
    short = _copy_store({"adaptive": [2.0, 2.2, 2.1], "fixed": [4.7, 4.8, 4.5]})
    assert gates.evaluate(WINS, short, keys, used).failed == ["used[copy, kind=fixed]"]


def test_used_names_its_class_first():
    with pytest.raises(claims.ClaimError, match="expected a dependency class first"):
        claims.parse("used[kind=fixed] and valid_bits[] < 1")
    assert [m for m, _ in claims.parse("used[long, limit=160]")[1]] == [
        "valid_bits.long",
        "blind_bits.long",
        "blind_bits.long",
        "floor_bits.long",
    ]


def test_an_arm_at_chance_by_design_does_not_block_the_arm_that_must_learn():
    # probe (a): S = 96 < D is blind by design (8.0 bits, above 0.8 x unigram); S = 160 must learn
    runs = pd.DataFrame(
        [
            {"model.span.limit": s, "train.seed": seed, "status": "finished", "valid_bits": b + 0.01 * seed}
            | {"unigram_bits": 8.0, "valid_bits.long": b + 0.02 * seed}
            for seed in range(3)
            for s, b in ((96, 8.07), (160, 1.9))
        ]
    )
    check, keys = "valid_bits.long[limit=160] <= valid_bits.long[limit=96] - 2", ["model.span.limit"]
    assert gates.evaluate(check, runs, keys, ["learned[]"]).status == "not evaluable"
    assert gates.evaluate(check, runs, keys, ["learned[limit=160]"]).status == "reproduced"


def test_best_picks_the_baseline_with_the_lowest_seed_mean_then_pairs_it_seed_by_seed():
    """as-table1's adaptive-beats-fixed compares against the best fixed span the manifest trains (issue 60):
    chosen once on the means, never each seed's luckiest arm."""
    runs = _replicated(
        {"adaptive": [2.0, 2.02, 2.01], "fixed": [2.2, 2.25, 2.21], "window": [2.05, 1.9, 2.09]}, "test_bits"
    )
    check = "test_bits[kind=adaptive] < best(test_bits[kind=fixed], test_bits[kind=window])"
    verdict = gates.evaluate(check, runs, ["model.span.kind"])
    assert "best: test_bits[kind=window]" in verdict.detail
    # paired with the window's own seeds: margins +0.05, -0.12, +0.08 (within noise), not a per-seed minimum
    assert verdict.status == "within noise"
    assert verdict.decided.per_seed == pytest.approx((0.05, -0.12, 0.08))


def test_a_failing_premise_makes_the_claim_not_evaluable_with_its_numbers_on_the_line():
    """A fixed-span baseline that does not use its context (its bits rise with S) is no baseline: the
    claim reads "not evaluable: premise fails (numbers)", whichever way it would have read (issue 60)."""
    from repro.report.results import ClaimResult

    runs = _replicated({"adaptive": [2.0, 2.02, 2.01], "fixed": [2.2, 2.25, 2.21], "window": [2.1, 2.12, 2.11]})
    premise = "valid_bits[kind=fixed] <= valid_bits[kind=window]"
    for check in (WINS, WINS.replace("<", ">")):
        verdict = gates.evaluate(check, runs, ["model.span.kind"], requires=[premise])
        assert verdict.status == "not evaluable" and verdict.failed == [premise]
        line = ClaimResult("m", "cpu", "c", "", check, verdict).line({premise: "P1"})
        assert "precondition P1 fails (" in line and "2.22 ± 0.026" in line and "fails on seeds 0, 1, 2 of 3" in line
