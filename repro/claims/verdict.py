"""What judging a claim gives: a :class:`Verdict`, made of the :class:`Margin` of each comparison, with its
p values, its minimum detectable effect against the claim's smallest effect of interest, and the gate that
stopped it when one did."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from repro.claims.stats import CONFIDENCE, POWER, detectable, detectable_band, noisy_mde

REPRODUCED, NOT_REPRODUCED, WITHIN_NOISE, INDICATIVE, NOT_EVALUABLE = (
    "reproduced",
    "not reproduced",
    "within noise",
    "indicative (one seed)",
    "not evaluable",
)
VERDICTS = (REPRODUCED, NOT_REPRODUCED, WITHIN_NOISE, INDICATIVE, NOT_EVALUABLE)
STATUS = {1: REPRODUCED, -1: NOT_REPRODUCED, 0: WITHIN_NOISE}
READING = {REPRODUCED: 1, NOT_REPRODUCED: -1, WITHIN_NOISE: 0}


def rule(confidence: float = CONFIDENCE) -> str:
    """The rule in one line, as every report states it."""
    c = f"{confidence:.0%}"
    return (
        f"a one-sided paired t interval at {c} over the seeds, centred on the mean of the per-seed margins (a "
        f"band: two one-sided tests at {1 - confidence:.0%}, the {2 * confidence - 1:.0%} interval): reproduced "
        f"when it clears the claim's threshold, not reproduced when it clears the opposite, within noise otherwise "
        f"(uninformative when its minimum detectable effect at {POWER:.0%} power, at the level the verdict is "
        f"read, Holm's in REPORT.md, exceeds the claim's smallest effect of interest, a band's its half-width; "
        f"the MDE is itself estimated from the seeds' spread: at 3 seeds a claim whose true MDE equals its "
        f"smallest effect reads uninformative {noisy_mde(3):.0%} of the time); parts of an `or`, the failing side of an `and` and the cells of a cell-wise claim "
        f"are Bonferroni-corrected inside the claim; a scale that declares looks (seeds: {{first, max}}) is judged "
        f"at the look its stored seeds reach, at that look's one-sided level from a Pocock-type Lan-DeMets "
        f"alpha-spending boundary over its looks (the line states it; its p is scaled alike for the family "
        f"adjustment); [lower, upper] are its bounds on the margin (positive favours "
        f"the claim); one seed: indicative; a precondition must hold on every seed, a control must be reproduced, "
        f"a bits verdict must keep its sign along the training curves, and a seed whose arms ran different or "
        f"uncommitted code is dropped (the verdict says which)"
    )


@dataclass
class Margin:
    """One comparison: the mean margin (the claim's side positive), its bounds, and the seeds behind it."""

    comparison: int  # which comparison of the check (0: the first)
    cell: str  # "" for a comparison of numbers
    mean: float
    lower: float
    upper: float
    n: int
    band: float | None = None  # abs(x) < band: mean/lower/upper are x's
    status: int = 0  # +1 holds, -1 fails, 0 within noise
    p_holds: float = math.nan  # one-sided p of "holds" (a band: the TOST's larger p)
    p_fails: float = math.nan  # one-sided p of "fails"
    mde: float = math.nan  # minimum detectable effect at POWER (NaN: one seed)
    per_seed: tuple[float, ...] = ()  # the margin on each seed, in seed order
    sides: tuple[int | None, int | None] = (None, None)  # the selections (claimed-lower, baseline) of a bits comparison
    p_two_sided: float = math.nan  # of a zero margin: what a family adjustment is fed
    p_sign_flip: float = math.nan  # the exact sign-flip permutation p of the reading's direction
    se: float = math.nan  # the standard error of the mean margin (NaN: one seed)

    def mde_at(self, level: float) -> float:
        """The minimum detectable effect at :data:`POWER` of a one-sided test at ``level`` (a band: of
        its two one-sided tests at ``level``)."""
        if self.n < 2 or math.isnan(self.se):
            return math.nan
        confidence = 1 - level
        return (detectable(self.n, confidence) if self.band is None else detectable_band(self.n, confidence)) * self.se

    def text(self) -> str:
        where = f"{self.cell}: " if self.cell else ""
        if self.n < 2 or self.lower == self.upper:
            core = f"{self.mean:+.3g}"
        else:
            core = f"{self.mean:+.3g} [{self.lower:+.3g}, {self.upper:+.3g}]"
        if self.band is None:
            return f"{where}{core}"
        # the band's words follow its outcome: inside, outside, or across its edge
        word = {1: "inside", -1: "outside"}.get(self.status, "across the edge of")
        return f"{where}{core}, {word} ±{self.band:.3g}"

    def p(self, status: int) -> float:
        """The p value of this margin's reading ``status`` (+1 holds, -1 fails; 0: the smaller of the two)."""
        return self.p_holds if status > 0 else self.p_fails if status < 0 else min(self.p_holds, self.p_fails)


@dataclass
class Verdict:
    status: str  # one of VERDICTS
    detail: str  # the numbers behind it
    seeds: int = 0  # the replicates it was judged on (0: not judged)
    margins: list[Margin] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # preconditions that did not hold (or could not be checked)
    holds: bool | None = None  # the direction an indicative (one-seed) verdict gave
    deciding: int | None = None  # the index in ``margins`` of the part that decided the verdict
    control: str | None = None  # the gate on the judged verdict that made it not evaluable (its detail says why)
    runs: frozenset = frozenset()  # the run ids the verdict compared
    computed: frozenset = frozenset()  # what those runs computed: REPORT.md's multiplicity counts these sets once
    p_holds: float = math.nan  # the claim's own p of "holds", its parts combined (Bonferroni inside the claim)
    p_fails: float = math.nan
    sesoi: float = math.nan  # the smallest effect of interest the claim declares (or its metric's default)
    held: list[str] = field(default_factory=list)  # the gates and controls it passed, each with its numbers
    dropped: list[str] = field(default_factory=list)  # the seeds left out (a value no number, provenance), with why
    read_at: float = math.nan  # the one-sided level of the verdict shown (Holm's, set by REPORT.md's adjustment)
    shown: str = ""  # the verdict the line leads with (Holm's), where it differs from ``status``
    look: str = ""  # a sequential design's look it was judged at, and that look's level (repro.claims.sequential)
    spend: float = 1.0  # the design's level over the look's: a family adjustment is fed p_two_sided times this
    lost: frozenset = frozenset()  # the runs of the seeds its provenance dropped (retraining them restores the seeds)
    covers: str = ""  # what its interval's seeds vary, and the split (set by the report: the runs say)
    post_hoc: str = ""  # its label where its design changed after its runs existed (repro.claims.registration)

    @property
    def decided(self) -> Margin | None:
        """The margin that decided: ``and``'s weakest part, ``or``'s strongest, a cell-wise claim's worst cell."""
        if not self.margins:
            return None
        return self.margins[self.deciding if self.deciding is not None else 0]

    @property
    def p(self) -> float:
        """The one-sided p value of the verdict's reading (NaN: not judged by t)."""
        if self.seeds < 2 or self.status not in READING:
            return math.nan
        reading = READING[self.status]
        return self.p_holds if reading > 0 else self.p_fails if reading < 0 else min(self.p_holds, self.p_fails)

    @property
    def p_two_sided(self) -> float:
        """The two-sided p of "no effect": a family adjustment's input (a band's: its TOST p)."""
        if self.seeds < 2 or self.status not in READING:
            return math.nan
        m = self.decided
        if m is not None and m.band is not None:
            return self.p_holds
        return min(1.0, 2 * min(self.p_holds, self.p_fails))

    @property
    def p_family(self) -> float:
        """What a family adjustment is fed: the two-sided p, scaled by :attr:`spend` at an interim look (so a
        test passes the adjustment at the design's level exactly when it crosses its look's boundary)."""
        return min(1.0, self.p_two_sided * self.spend)

    @property
    def mde(self) -> float:
        """The decided margin's minimum detectable effect at the level the verdict is read: Holm's where
        REPORT.md adjusted it (:attr:`read_at`), else the claim's own."""
        m = self.decided
        if m is None:
            return math.nan
        return m.mde if math.isnan(self.read_at) else m.mde_at(self.read_at)

    @property
    def uninformative(self) -> bool:
        """Within noise as shown, with a minimum detectable effect (at the level it is read) above the
        smallest effect of interest: these seeds could not have decided it."""
        return (self.shown or self.status) == WITHIN_NOISE and self.mde > self.sesoi

    @property
    def effect(self) -> str:
        """The headline number: the margin and bounds of the part (and cell) that decided, the seeds, and the
        minimum detectable effect where the verdict could not decide."""
        m = self.decided
        if m is None:
            return ""
        seeds = f"{self.seeds} seed" + "s" * (self.seeds != 1)
        at = f" at Holm's level {self.read_at:.2g}" if not math.isnan(self.read_at) else ""
        mde = f"; MDE {self.mde:.3g}{at} > {self.sesoi:.3g}: uninformative" if self.uninformative else ""
        look = f"; {self.look}" if self.look else ""
        covers = f" ({self.covers})" if self.covers and self.seeds > 1 else ""
        return f"{m.text()}, {seeds}{covers}{look}{mde}"


def stopped(verdict: Verdict, control: str, why: str) -> Verdict:
    """``verdict`` made not evaluable by the gate ``control``, saying why and what it was judged."""
    detail = f"{why}; as judged ({verdict.status}): {verdict.effect or verdict.detail}"
    return replace(verdict, status=NOT_EVALUABLE, detail=detail, control=control, holds=None)


def failed_text(names: list[str]) -> str:
    """``precondition P1 fails`` / ``preconditions P1, P2 fail``."""
    return f"precondition {names[0]} fails" if len(names) == 1 else f"preconditions {', '.join(names)} fail"
