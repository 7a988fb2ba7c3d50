import pandas as pd
import pytest

from repro.config import claims
from repro.report import verdicts


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
    v = verdicts.evaluate("avg_span[span.kind=adaptive, span.limit=1024] < 0.25 * 1024", RUNS, KEYS)
    assert said(v) == "holds" and "120" in v.detail
    assert said(verdicts.evaluate("avg_span[kind=adaptive, limit=1024] > 200", RUNS, KEYS)) == "fails"


def test_series_compare_cell_by_cell():
    assert said(verdicts.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", RUNS, KEYS)) == "holds"
    worse = RUNS.copy()
    worse.loc[3, "valid_bits"] = 1.09  # adaptive loses at S=1024 only
    assert said(verdicts.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", worse, KEYS)) == "fails"
    assert said(verdicts.evaluate("mean(avg_span[kind=adaptive]) < 200", RUNS, KEYS)) == "holds"


def test_missing_or_unfinished_runs_are_not_evaluable():
    assert verdicts.evaluate("valid_bits[kind=dynamic] < 2", RUNS, KEYS).status == "not evaluable"
    running = RUNS.assign(status=["finished", "running", "finished", "finished"])
    assert verdicts.evaluate("valid_bits[kind=fixed] > 1", running, KEYS).status == "not evaluable"


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
    assert said(verdicts.evaluate(ADAPTIVE_WINS, TRIVIAL, KEYS)) == "holds"  # without preconditions
    verdict = verdicts.evaluate(ADAPTIVE_WINS, TRIVIAL, KEYS, [MOVED, USES_CONTEXT])
    assert verdict.status == "not evaluable" and verdict.failed == [MOVED, USES_CONTEXT]
    assert "0.6" in verdicts.precondition(MOVED, TRIVIAL, KEYS).detail
    moved = TRIVIAL.assign(span_max=[64, 512, 40.0, 90.0])
    verdict = verdicts.evaluate(ADAPTIVE_WINS, moved, KEYS, [MOVED, USES_CONTEXT])
    assert verdict.status == "not evaluable" and verdict.failed == [USES_CONTEXT] and USES_CONTEXT in verdict.detail
    trained = moved.assign(valid_bits=[2.49, 2.30, 2.40, 2.28])
    assert said(verdicts.evaluate(ADAPTIVE_WINS, trained, KEYS, [MOVED, USES_CONTEXT])) == "holds"
    assert said(verdicts.evaluate("valid_bits[kind=adaptive] < 2", trained, KEYS, [MOVED])) == "fails"


def test_a_precondition_that_cannot_be_checked_makes_the_claim_not_evaluable():
    verdict = verdicts.evaluate(
        ADAPTIVE_WINS, TRIVIAL.drop(columns="unigram_bits"), KEYS, ["max(valid_bits[]) < 0.8 * min(unigram_bits[])"]
    )
    assert verdict.status == "not evaluable" and verdict.failed == ["max(valid_bits[]) < 0.8 * min(unigram_bits[])"]


def test_first_and_last_follow_grid_order():
    assert said(verdicts.evaluate("first(avg_span[kind=fixed]) < last(avg_span[kind=fixed])", TRIVIAL, KEYS)) == "holds"


def test_two_runs_in_one_cell_are_never_paired_by_position():
    doubled = pd.concat([TRIVIAL, TRIVIAL.iloc[[1]].assign(valid_bits=2.0)], ignore_index=True)
    verdict = verdicts.evaluate(ADAPTIVE_WINS, doubled, KEYS)
    assert verdict.status == "not evaluable" and "share a cell" in verdict.detail


TIMED = RUNS.assign(seconds_per_step=[0.30, 0.35, 0.20, 0.25], ran_alone=True, load_average_max=2.1, cpus=2)
FASTER = "seconds_per_step[kind=adaptive] < seconds_per_step[kind=fixed]"


def test_timing_claims_count_only_runs_that_ran_alone():
    assert said(verdicts.evaluate(FASTER, TIMED, KEYS)) == "holds"
    loaded = TIMED.assign(ran_alone=[True, True, False, True], load_average_max=[2.1, 2.1, 4.3, 2.1])
    verdict = verdicts.evaluate(FASTER, loaded, KEYS)
    assert verdict.status == "not evaluable" and "1 of 2 run(s) shared the machine" in verdict.detail
    assert "4.30 on 2 cores" in verdict.detail
    stolen = loaded.assign(others_cores_max=[0.1, 0.1, 0.7, 0.1], steal_cores_max=[0.0, 0.0, 0.6, 0.0])
    detail = verdicts.evaluate(FASTER, stolen, KEYS).detail  # no process of its own: the host's other guests
    assert "up to 0.70 of 2 cores busy, the hypervisor's steal up to 0.60" in detail
    older = TIMED.drop(columns=["ran_alone"])  # stored before the load was recorded
    verdict = verdicts.evaluate(FASTER, older, KEYS)
    assert verdict.status == "not evaluable" and "no load record" in verdict.detail
    # replicates: a seed whose timed runs did not run alone is left out, the others judge the claim
    seeds = pd.concat(
        [older.assign(**{verdicts.SEED: 0}), TIMED.assign(**{verdicts.SEED: 1}), TIMED.assign(**{verdicts.SEED: 2})]
    )
    verdict = verdicts.evaluate(
        FASTER, seeds.assign(seconds_per_step=[0.3, 0.35, 0.2, 0.25] * 2 + [0.3, 0.36, 0.2, 0.26]), KEYS
    )
    assert verdict.status == "reproduced" and verdict.seeds == 2, verdict.detail
    # a claim on other metrics of the same runs is judged as before
    assert said(verdicts.evaluate("valid_bits[kind=adaptive] <= valid_bits[kind=fixed]", loaded, KEYS)) == "holds"


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
    verdict = verdicts.evaluate(WINS, runs, ["model.span.kind"])
    assert verdict.status == "within noise" and verdict.seeds == 3
    assert (
        "2.31 ± 0.066" in verdict.detail and "margin +0.01 [" in verdict.detail and "3 seeds, paired" in verdict.detail
    )
    # one seed alone indicates a loss, and is never called "not reproduced"
    alone = verdicts.evaluate(WINS, runs[runs["train.seed"] == 0], ["model.span.kind"])
    assert said(alone) == "fails" and "one seed" in alone.detail


def test_a_paired_difference_beyond_two_standard_errors_decides():
    # the seeds move both cells together (a large spread of the means) but adaptive wins by 0.02 in each pair
    runs = _replicated({"adaptive": [2.28, 2.38, 2.18], "fixed": [2.30, 2.40, 2.20]})
    assert verdicts.evaluate(WINS, runs, ["model.span.kind"]).status == "reproduced"
    losing = _replicated({"adaptive": [2.32, 2.42, 2.22], "fixed": [2.30, 2.40, 2.21]})
    assert verdicts.evaluate(WINS, losing, ["model.span.kind"]).status == "not reproduced"


def test_thresholds_apply_to_the_seed_means_and_preconditions_to_every_seed():
    runs = _replicated({"adaptive": [30.0, 40.0, 80.0]}, metric="span_max")
    keys = ["model.span.kind"]
    assert verdicts.evaluate("span_max[kind=adaptive] >= 45", runs, keys).status == "within noise"  # mean 50
    assert verdicts.evaluate("span_max[kind=adaptive] > 0", runs, keys).status == "reproduced"
    # the precondition holds on the mean (50), but seed 0 has 30: a gate must hold on every seed
    gate = "span_max[kind=adaptive] >= 45"
    gated = verdicts.evaluate("span_max[kind=adaptive] < 1000", runs, keys, [gate])
    assert gated.status == "not evaluable" and gated.failed == [gate]
    assert "fails on seeds 0, 1 of 3" in verdicts.precondition(gate, runs, keys).detail
    gated = verdicts.evaluate("span_max[kind=adaptive] < 1000", runs, keys, ["span_max[kind=adaptive] >= 25"])
    assert gated.status == "reproduced"


def test_only_seeds_that_complete_the_claim_are_paired():
    runs = _replicated({"adaptive": [2.28, 2.38, 2.18], "fixed": [2.30, 2.40]})  # fixed's seed 2 not run yet
    verdict = verdicts.evaluate(WINS, runs, ["model.span.kind"])
    assert verdict.seeds == 2 and "2 seeds, paired" in verdict.detail


def test_a_gate_on_a_cell_with_fewer_seeds_does_not_cut_the_claims_pairs():
    # dynamic, which the claim does not compare, has one seed; a manifest-wide gate names it too
    runs = _replicated({"adaptive": [2.28, 2.38, 2.18], "fixed": [2.30, 2.40, 2.20], "dynamic": [2.5]})
    gate = "valid_bits[] < 3"
    verdict = verdicts.evaluate(WINS, runs, ["model.span.kind"], [gate])
    assert verdict.status == "reproduced" and verdict.seeds == 3, verdict.detail
    # the gate is still judged, on the seeds that complete it (here seed 0 alone), and still gates
    assert verdicts.precondition(gate, runs, ["model.span.kind"]).seeds == 1
    assert verdicts.evaluate(WINS, runs, ["model.span.kind"], ["valid_bits[] < 2.4"]).status == "not evaluable"


def test_a_manifest_without_a_grid_pairs_its_seeds_too():
    runs = pd.DataFrame(
        [{"train.seed": i, "status": "finished", "test_bits": b} for i, b in enumerate([3.2, 3.3, 3.1])]
    )
    verdict = verdicts.evaluate("test_bits[] < 4", runs, [])
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
    verdict = verdicts.evaluate("max(valid_bits[]) < 8", runs, ["data"])
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
    verdict = verdicts.evaluate(WINS, runs, ["model.span.kind"], confidence=confidence)
    assert verdict.status == status and verdict.seeds == n, verdict.detail
    (margin,) = verdict.margins
    half = verdicts.t_quantile(confidence, n - 1) * se
    assert margin.mean == pytest.approx(se_multiple * se) and margin.lower == pytest.approx(margin.mean - half)


def test_one_seed_is_indicative_in_either_direction_and_counted_apart():
    for margin, direction in ((0.3, "holds"), (-0.3, "fails")):
        verdict = verdicts.evaluate(WINS, _margins([margin]), ["model.span.kind"])
        assert said(verdict) == direction and verdict.effect == f"{margin:+.3g}, 1 seed"


def test_a_band_is_judged_by_two_one_sided_tests():
    near = "abs(valid_bits[kind=adaptive] - valid_bits[kind=fixed]) < 0.05"
    # differences 0.01 +- 0.005 over 3 seeds: the 90% interval (TOST at 5%) lies inside +-0.05
    assert verdicts.evaluate(near, _margins([0.005, 0.01, 0.015]), ["model.span.kind"]).status == "reproduced"
    # 0.2 apart in every seed: wholly outside the band
    assert verdicts.evaluate(near, _margins([0.19, 0.2, 0.21]), ["model.span.kind"]).status == "not reproduced"
    # 0.04 +- 0.02: the interval [-0.01, 0.09] straddles the band's edge
    verdict = verdicts.evaluate(near, _margins([0.02, 0.04, 0.06]), ["model.span.kind"])
    assert verdict.status == "within noise" and verdict.margins[0].band == 0.05
    t1 = verdicts.t_quantile(0.95, 2)  # one-sided 95%: the ends of the two-sided 90% interval
    assert verdict.margins[0].upper == pytest.approx(-0.04 + t1 * 0.02 / 3**0.5)  # x = adaptive - fixed
    assert verdict.effect.startswith("-0.04 [") and "across the edge of ±0.05" in verdict.effect
    # the TOST's p is the larger of its two one-sided p values, and decides as the interval does
    p = verdict.margins[0].p_holds
    assert p > 0.05 and verdicts.evaluate(near, _margins([0.005, 0.01, 0.015]), ["model.span.kind"]).p < 0.05
    # 0.045 +- 0.001: the 95% two-sided interval would cross 0.05, the TOST's 90% one does not
    tight = verdicts.evaluate(near, _margins([0.044, 0.045, 0.046]), ["model.span.kind"])
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


def test_a_span_claim_gets_its_moved_precondition_without_its_author_writing_it(tmp_path):
    from repro.config import manifest as manifests

    path = tmp_path / "ramp-trivial.yaml"
    path.write_text(RAMP_MANIFEST)
    m = manifests.load(path)
    (claim,) = m.claims
    assert claim.requires == ["moved[ramp=64]", "moved[ramp=16]"]
    assert any("can hold by construction" in w for w in m.claim_warnings())
    # the spans never left z = 0 (span_max < R): avg_span is z + R, 69.3 vs 16.9 by construction
    runs = pd.DataFrame(
        [
            {"model.span.ramp": r, "model.span.kind": "adaptive", "span_limit": 256, "status": "finished"}
            | {"avg_span": a, "span_max": z}
            for r, a, z in [(16, 16.9, 0.9), (64, 69.3, 5.3)]
        ]
    )
    keys = ["model.span.ramp"]
    verdict = verdicts.evaluate(claim.check, runs, keys, claim.requires)
    assert verdict.status == "not evaluable" and verdict.failed == ["moved[ramp=64]", "moved[ramp=16]"]
    # the longest heads moved, but the average span of ramp 16 stayed below 1.25 R = 20: not moved
    longest = runs.assign(span_max=[40.0, 90.0], avg_span=[16.9, 85.0])
    assert verdicts.evaluate(claim.check, longest, keys, claim.requires).failed == ["moved[ramp=16]"]
    # both moved; yet at z = 0 the spans are R = 64 against 16, so the claim held before training: the
    # initial-span control makes it not evaluable (it says nothing about what was learned)
    moved = longest.assign(avg_span=[30.0, 100.0])
    verdict = verdicts.evaluate(claim.check, moved, keys, claim.requires)
    assert verdict.status == "not evaluable" and verdict.control == "initial-span control", verdict
    assert "holds at the initial spans too" in verdict.detail


def test_the_initial_span_control_passes_a_claim_against_a_lambda_zero_control():
    """Both arms start at R: the penalty shortening the span cannot hold at z = 0, so it is judged."""
    runs = _replicated({"0.0": [120.0, 130.0, 125.0], "2e-06": [60.0, 62.0, 58.0]}, metric="avg_span")
    runs = runs.rename(columns={"model.span.kind": "model.span.loss_coef"})
    runs = runs.assign(**{"model.span.kind": "adaptive", "span_limit": 1024, "model.span.ramp": 32})
    check = "avg_span[loss_coef=2e-06] < avg_span[loss_coef=0.0]"
    assert verdicts.evaluate(check, runs, ["model.span.loss_coef"]).status == "reproduced"
    # against S it is true by construction (R = 32 < 0.1 S at z = 0): not evaluable
    far = verdicts.evaluate("avg_span[loss_coef=2e-06] < 0.1 * 1024", runs, ["model.span.loss_coef"])
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
    verdict = verdicts.evaluate(check, runs, ["model.span.kind"])
    assert verdict.status == "reproduced" and verdict.decided.comparison == 1, verdict.margins
    assert verdict.effect.startswith("+0.3 [")  # fixed - adaptive: 0.3 on every seed
    both = check.replace(" or ", " and ")
    assert verdicts.evaluate(both, runs, ["model.span.kind"]).decided.comparison == 0  # and: the weakest


def test_each_verdict_has_its_p_value_and_minimum_detectable_effect():
    verdict = verdicts.evaluate(WINS, _margins([0.1, 0.3, 0.2]), ["model.span.kind"])
    m = verdict.decided
    se = 0.1 / 3**0.5
    from scipy import stats

    assert m.p_holds == pytest.approx(stats.t.sf(0.2 / se, 2)) and verdict.p == m.p_holds
    assert m.mde == pytest.approx((stats.t.ppf(0.95, 2) + stats.t.ppf(0.8, 2)) * se)
    assert verdict.status == "reproduced" and not verdict.uninformative
    # within noise with an MDE above the margin: these seeds could not have decided it
    noisy = verdicts.evaluate(WINS, _margins([0.6, -0.5, 0.05]), ["model.span.kind"])
    assert noisy.status == "within noise" and noisy.uninformative and "uninformative" in noisy.effect


def test_a_bits_claim_on_a_baseline_still_improving_is_not_evaluable():
    runs = _margins([0.1, 0.12, 0.11]).assign(valid_gain_last_fifth=0.01)
    assert verdicts.evaluate(WINS, runs, ["model.span.kind"]).status == "reproduced"
    # the baseline (fixed) still gained 0.05 bits over its last fifth: at least a quarter of the 0.11 margin
    gaining = runs.assign(valid_gain_last_fifth=[0.0 if k == "adaptive" else 0.05 for k in runs["model.span.kind"]])
    verdict = verdicts.evaluate(WINS, gaining, ["model.span.kind"])
    assert verdict.status == "not evaluable" and verdict.control == "trained baseline", verdict.detail
    assert "still gained 0.05 bits" in verdict.detail
    # the claimed-better side still improving does not flatter a reproduced claim: judged as before
    better = runs.assign(valid_gain_last_fifth=[0.05 if k == "adaptive" else 0.0 for k in runs["model.span.kind"]])
    assert verdicts.evaluate(WINS, better, ["model.span.kind"]).status == "reproduced"
    # ...but it does flatter a not-reproduced one
    lost = verdicts.evaluate(WINS, better.assign(valid_bits=2.0 - better["valid_bits"] + 2.0), ["model.span.kind"])
    assert lost.status == "not evaluable" and lost.control == "trained claimed-better side"


def test_seed_means_of_many_summary_columns_raise_no_performance_warning():
    """A summary has ~100 numeric keys: averaging them column by column fragmented the frame, and
    ``repro report --all`` printed 42 pandas PerformanceWarnings."""
    import warnings

    runs = _replicated({"adaptive": [2.0, 2.1], "fixed": [2.2, 2.3]})
    runs = pd.concat([runs, pd.DataFrame({f"m{i}": [float(i)] * len(runs) for i in range(150)})], axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        means = verdicts.seed_means(runs, ["model.span.kind"])
    assert list(means["valid_bits"]) == pytest.approx([2.05, 2.25]) and list(means["seeds"]) == [2, 2]
    assert means["m7"].tolist() == [7.0, 7.0] and list(means.columns[:4]) == list(runs.columns[:4])


def test_the_power_note_says_before_a_run_what_its_seeds_can_decide(tmp_path, capsys):
    from scipy import stats

    from repro.cli import main

    two = verdicts.power_note(2)
    assert f"clears {stats.t.ppf(0.95, 1) / 2**0.5:.2f} x the sd" in two and "(3 seeds: 2.30 sd)" in two
    assert "indicative only" in verdicts.power_note(1)
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
    keys, guards = ["model.span.kind"], ["learned[]", "moved[kind=adaptive]"]
    blind = _copy_store({"adaptive": [6.01, 6.0, 6.02], "fixed": [6.0, 6.03, 6.01]})
    # today's rule: the data learned, the spans moved, adaptive wins: reproduced with nothing copied
    assert verdicts.evaluate(WINS, blind, keys, guards).status == "reproduced"
    used = [*guards, "used[copy, kind=adaptive]", "used[copy, kind=fixed]"]
    stopped = verdicts.evaluate(WINS, blind, keys, used)
    assert stopped.status == "not evaluable" and stopped.failed == used[2:]
    # the guard passes once the copies are predicted a quarter of the way from blind to the floor
    copied = _copy_store({"adaptive": [2.0, 2.2, 2.1], "fixed": [4.7, 4.6, 4.5]})
    assert verdicts.evaluate(WINS, copied, keys, used).status == "reproduced"
    # 4.8 is less than a quarter of the way down from 6.0 (the line is 6.0 - 0.25 * 4.95 = 4.76)
    short = _copy_store({"adaptive": [2.0, 2.2, 2.1], "fixed": [4.7, 4.8, 4.5]})
    assert verdicts.evaluate(WINS, short, keys, used).failed == ["used[copy, kind=fixed]"]


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
    assert verdicts.evaluate(check, runs, keys, ["learned[]"]).status == "not evaluable"
    assert verdicts.evaluate(check, runs, keys, ["learned[limit=160]"]).status == "reproduced"
