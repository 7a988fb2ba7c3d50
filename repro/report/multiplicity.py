"""REPORT.md's adjustment for the number of findings judged: Holm and Benjamini-Hochberg, per declared
family at one scale (a manifest's ``family:``, else its paper: the suite's precision checks are adjusted
with their paper's findings, the frontier's hypotheses in their own family)."""

from __future__ import annotations

import math

from repro.claims import stats
from repro.claims import verdict as verdicts
from repro.report.results import ClaimResult


def multiplicity(results: list[ClaimResult], alpha: float, families: dict[str, str]) -> str:
    """Adjust the t-judged findings among ``results`` for their number, in declared families at one
    scale (``families``: manifest -> family), each test fed its two-sided p (the direction is read from the
    data) and counted once over distinct sets of computations (the same runs stored under two ids, e.g. the
    frontier's fixed and st-table2's, are one test), setting each one's ``adjusted`` (Holm's and
    Benjamini-Hochberg's verdicts); returns REPORT.md's paragraph saying so."""
    judged = [
        r
        for r in results
        if r.verdict.seeds >= 2
        and r.verdict.status in (verdicts.REPRODUCED, verdicts.NOT_REPRODUCED, verdicts.WITHIN_NOISE)
        and not (r.sanity or r.cost)
        and r.verdict.decided is not None  # judged by t: a margin measured (not an exact or bare truth)
        and not math.isnan(r.verdict.p_family)
    ]

    def key(r: ClaimResult) -> tuple:
        return (r.verdict.computed or r.verdict.runs or (r.manifest, r.scale, r.id), round(r.verdict.decided.mean, 6))

    tested: dict[tuple[str, str], dict[tuple, float]] = {}
    seen: set[tuple] = set()
    for r in judged:  # a test reported twice (by two manifests) counts once, in the family that reports it first
        if key(r) not in seen:
            seen.add(key(r))
            tested.setdefault((families.get(r.manifest, "?"), r.scale), {})[key(r)] = r.verdict.p_family
    kept, bars = {}, {}
    for tests in tested.values():
        holm, bh = stats.adjusted(list(tests.values()), alpha)
        kept |= {k: (h, b) for k, h, b in zip(tests, holm, bh)}
        bars |= dict(zip(tests, stats.holm_levels(list(tests.values()), alpha)))
    for r in judged:
        h, b = kept[key(r)]
        found = r.verdict.status != verdicts.WITHIN_NOISE
        r.adjusted = tuple(r.verdict.status if found and ok else verdicts.WITHIN_NOISE for ok in (h, b))
        # power at the level the verdict is read: Holm's bar on the p it is fed, as a one-sided level of
        # its own test (a directional p is fed two-sided: half the bar; an interim look's p scaled by spend)
        one_sided = bars[key(r)] / (1 if r.verdict.decided.band is not None else 2) / r.verdict.spend
        r.verdict.read_at, r.verdict.shown = one_sided, r.adjusted[0]
    findings = [r for r in judged if r.verdict.status != verdicts.WITHIN_NOISE]
    directional = sum(1 for r in judged if r.verdict.decided.band is None)
    bands = len(judged) - directional
    sizes = ", ".join(f"{family} {scale}: {len(tests)}" for (family, scale), tests in sorted(tested.items()))
    post_hoc = sum(1 for r in judged if r.verdict.post_hoc)
    return (
        f"**Multiplicity:** {len(judged)} verdicts are judged by the t rule (sanity and cost checks apart): "
        f"{len(findings)} *findings* (reproduced or not reproduced before adjustment) and "
        f"{len(judged) - len(findings)} within noise; {sum(len(t) for t in tested.values())} distinct tests once "
        f"verdicts on the same runs and margin are counted once, in the declared families (a manifest's `family`, "
        f"else its paper) at one scale ({sizes}). A directional verdict at {alpha:.0%} per "
        f"tail reads a zero effect as a finding {2 * alpha:.0%} of the time: its {directional} directional tests "
        f"alone expect {2 * alpha * directional:.1f} false readings were no effect real, its {bands} bands "
        f"{alpha * bands:.1f}. Each family is adjusted on the tests' two-sided p values: *Holm* (family-wise error "
        f"at {alpha:.0%}) and *BH* (Benjamini-Hochberg, false discovery rate at {alpha:.0%}); the verdict columns "
        f"lead with Holm's. Of the {len(findings)} findings, {sum(r.adjusted[0] == r.verdict.status for r in findings)} "
        f"survive Holm and {sum(r.adjusted[1] == r.verdict.status for r in findings)} survive BH (the verdict "
        f"counts below read Holm's verdicts). {post_hoc} of the {len(judged)} are *post hoc*: their design (check, "
        f"premises, controls, smallest effect, split, looks or family) changed after their runs existed, each line "
        f"says what. Each line says what its interval covers: the seeds vary the initialisation (and the data "
        f"order only where batches are drawn from the seed: images and audio clips shuffled per epoch, stream "
        f"passes at a seeded offset), on the one split its manifest declares. The claims csvs give each verdict's sign-flip permutation p beside its t p."
    )
