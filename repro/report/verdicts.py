"""Verdicts: a claim (:mod:`repro.config.claims`) judged over a manifest's stored runs, its seed noise stated.

Replicates (runs of one cell that differ only in ``train.seed``) are judged together. A claim is judged on
the seeds whose runs complete every selection of the claim; each precondition on the seed means of the
seeds that complete its own selections (a precondition is a gate, not a finding: a cell the claim does not
compare, missing a seed, takes no pair from it). Each comparison of the claim is judged on its
*margin* (``b - a`` for ``a < b``, ``value - threshold`` for ``value > threshold``), one per seed (each
seed's runs compared with the same seed's: paired):

- **directional** (``<``, ``<=``, ``>``, ``>=``): a one-sided paired t interval at the confidence level c
  (default :data:`CONFIDENCE`): the bounds ``m ± t(c, n - 1) · SE`` of the mean margin m, with
  SE = sd / sqrt(n). *Reproduced* when the lower bound clears 0, *not reproduced* when the upper bound
  falls short of it, *within noise* otherwise. Shown as ``[lower, upper]``: the two-sided (2c - 1) interval
  whose ends are the one-sided c bounds;
- **band** (``abs(x) < k``): the equivalence test (TOST): two one-sided tests at level 1 - c, i.e. the
  two-sided (2c - 1) interval of x (90% at c = 95%, the same bounds a directional claim shows);
  *reproduced* when it lies inside (-k, k), *not reproduced* when it lies wholly outside;
- **equality** (``==``, ``!=``): exact, on the seed means (the values it compares are counts).

A spread of zero lets the sign decide. With one seed there is no spread: the verdict is *indicative (one
seed)*, with the direction the sign gave, counted apart. ``and`` takes the weakest part, ``or`` the
strongest, a comparison across cells every cell; the headline effect is the part that decided.

Each margin has its one-sided p value (the TOST's larger one for a band) and its *minimum detectable
effect* at its seeds: ``(t(c, n - 1) + t(0.8, n - 1)) · SE``, the smallest true margin it would find at
80% power. A *within noise* verdict whose MDE exceeds the margin at stake (the band's k, else the mean
margin's size) is *uninformative*: these seeds could not have decided it. REPORT.md adjusts the p values
for multiplicity (:func:`adjusted`: Holm and Benjamini-Hochberg).

Gates that keep a verdict honest, each *not evaluable* with its numbers when it fails:

- a precondition holds only when it holds on *every* seed the claim pairs (never on a seed mean);
- **the initial-span control**: a claim on a span metric (:data:`claims.INITIAL`) that would hold at the
  spans' initial value (z = 0) too says nothing about the penalty;
- **trained baselines**: in a comparison of bits, the side whose under-training would flatter the verdict
  (the baseline of a *reproduced* claim, the claimed-better side of a *not reproduced* one) must have
  gained less than a quarter of the margin over its last fifth of training (``valid_gain_last_fifth``).

A timing metric (:data:`claims.TIMED`) counts only from runs whose summary says they ran alone
(``ran_alone``: no sampled interval of training had other processes keeping more than half a core busy;
runs stored before 2026-12-02 judged it from the 1-minute load average); a seed whose timed runs shared
the machine is left out, and a claim with no such seed is not evaluable, saying which and how much.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from repro.config import claims
from repro.config.cells import cell_text, value_text
from repro.config.claims import TIMED, shown
from repro.config.keys import matching

CONFIDENCE = 0.95
POWER = 0.8  # the power at which a minimum detectable effect is stated
BASELINE_GAIN = 0.25  # of the margin: the most a bits comparison's baseline may still gain over its last fifth
BITS = ("valid_bits", "test_bits")
GAIN = "valid_gain_last_fifth"
SEED = "train.seed"  # the column that tells a cell's replicates apart
REPRODUCED, NOT_REPRODUCED, WITHIN_NOISE, INDICATIVE, NOT_EVALUABLE = (
    "reproduced",
    "not reproduced",
    "within noise",
    "indicative (one seed)",
    "not evaluable",
)
VERDICTS = (REPRODUCED, NOT_REPRODUCED, WITHIN_NOISE, INDICATIVE, NOT_EVALUABLE)
_STATUS = {1: REPRODUCED, -1: NOT_REPRODUCED, 0: WITHIN_NOISE}
_READING = {REPRODUCED: 1, NOT_REPRODUCED: -1, WITHIN_NOISE: 0}
_FUNCTIONS = {
    "mean": lambda s: _as_series(s).mean(),
    "min": lambda s: _as_series(s).min(),
    "max": lambda s: _as_series(s).max(),
    "abs": abs,
    "all": lambda s: bool(_as_series(s).all()),
    "any": lambda s: bool(_as_series(s).any()),
    "first": lambda s: _as_series(s).iloc[0],
    "last": lambda s: _as_series(s).iloc[-1],
}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def rule(confidence: float = CONFIDENCE) -> str:
    """The rule in one line, as every report states it."""
    c = f"{confidence:.0%}"
    return (
        f"a one-sided paired t interval at {c} over the seeds (a band: two one-sided tests at {1 - confidence:.0%}, "
        f"the {2 * confidence - 1:.0%} interval): reproduced when it clears the claim's threshold, not reproduced "
        f"when it clears the opposite, within noise otherwise (uninformative when its minimum detectable effect at "
        f"{POWER:.0%} power exceeds the margin at stake); [lower, upper] are its bounds on the margin (positive "
        f"favours the claim); one seed: indicative; a precondition must hold on every seed"
    )


class NotEvaluable(Exception):
    """The runs a claim needs are missing or unfinished."""


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
    gains: tuple[float, float] = (math.nan, math.nan)  # bits comparisons: last-fifth gains of (better, baseline)

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

    @property
    def at_stake(self) -> float:
        """The margin the claim is about: a band's k, else the mean margin's size."""
        return float(self.band) if self.band is not None else abs(self.mean)

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
    runs: frozenset = frozenset()  # the run ids the verdict compared (REPORT.md's multiplicity counts run sets)

    @property
    def decided(self) -> Margin | None:
        """The margin that decided: ``and``'s weakest part, ``or``'s strongest, a cell-wise claim's worst cell."""
        if not self.margins:
            return None
        return self.margins[self.deciding if self.deciding is not None else 0]

    @property
    def p(self) -> float:
        """The p value of the verdict's reading, from the deciding margin (NaN: not judged by t)."""
        m = self.decided
        if m is None or self.seeds < 2 or self.status not in _READING:
            return math.nan
        return m.p(_READING[self.status])

    @property
    def uninformative(self) -> bool:
        """Within noise, with a minimum detectable effect above the margin at stake: undecidable at these seeds."""
        m = self.decided
        return self.status == WITHIN_NOISE and m is not None and m.mde > m.at_stake

    @property
    def effect(self) -> str:
        """The headline number: the margin and bounds of the part (and cell) that decided, the seeds, and the
        minimum detectable effect where the verdict could not decide."""
        m = self.decided
        if m is None:
            return ""
        seeds = f"{self.seeds} seed" + "s" * (self.seeds != 1)
        mde = f"; MDE {m.mde:.3g} > {m.at_stake:.3g}: uninformative" if self.uninformative else ""
        return f"{m.text()}, {seeds}{mde}"


def evaluate(
    check: str,
    runs: pd.DataFrame,
    cell_keys: list[str],
    requires: list[str] = (),
    confidence: float = CONFIDENCE,
) -> Verdict:
    """Judge ``check`` over ``runs`` (one row per run in grid order: ``status``, the cell keys, the summary
    metrics, ``train.seed`` for replicates), after its preconditions ``requires``."""
    # a claim that the models learned is no precondition of itself
    failed = [p for p in requires if p != check and precondition(p, runs, cell_keys).status != REPRODUCED]
    if failed:
        return Verdict(NOT_EVALUABLE, failed_text([f"`{p}`" for p in failed]), failed=failed)
    frames, means = _paired(runs, cell_keys, [check])
    verdict = _judge(check, means, frames, cell_keys, confidence)
    return _trained_baselines(_initial_span_control(check, verdict, means, cell_keys, confidence))


def _initial_span_control(
    check: str, verdict: Verdict, means: pd.DataFrame, cell_keys: list[str], confidence: float
) -> Verdict:
    """Not evaluable when the claim holds and would hold at the spans' initial value too (z = 0): true
    by construction, it says nothing about the penalty (a lambda = 0 control starts alike, so a claim
    against one passes this control)."""
    spans = [f for m, f in claims.parse(check)[1] if m in claims.INITIAL]
    learned = _learned(means)
    if not spans or learned is None or not (verdict.status == REPRODUCED or verdict.holds):
        return verdict
    try:
        touched = any(learned[_matching(means, cell_keys, f).index].any() for f in spans)
    except NotEvaluable:
        touched = False
    start = initial_spans(means, learned) if touched else None
    if start is None or not _judge(check, start, [start], cell_keys, confidence).holds:
        return verdict  # no learned span among the runs its span metrics select, or it fails at z = 0
    return _stopped(
        verdict,
        "initial-span control",
        "holds at the initial spans too (z = 0, avg_span = min(S, R)), so it says nothing about the penalty: "
        "compare with a lambda = 0 control",
    )


def initial_spans(rows: pd.DataFrame, learned: pd.Series) -> pd.DataFrame | None:
    """``rows`` with each learned span's metrics (``learned``: which rows) at their initial value (z = 0):
    the average effective span at min(S, R), the mean z of :data:`claims.INITIAL`'s others at 0; None
    where the rows do not record S and R."""
    out = rows.copy()
    limit = out["span_limit"] if "span_limit" in out else out.get("model.span.limit")
    ramp = out.get("model.span.ramp")
    for metric in [m for m in claims.INITIAL if m in out]:
        if metric != "avg_span":
            out[metric] = out[metric].where(~learned, 0.0)
        elif limit is None or ramp is None:
            return None
        else:
            out[metric] = out[metric].where(~learned, np.minimum(limit, ramp))
    return out


def _learned(rows: pd.DataFrame) -> pd.Series | None:
    """Which rows' spans are learned (the adaptive or dynamic span; None: the rows do not say)."""
    if "model.attention" in rows:
        return rows["model.attention"].isin(["adaptive", "dynamic"])
    if "model.span.kind" in rows:
        return rows["model.span.kind"] != "fixed"
    return None


def _stopped(verdict: Verdict, control: str, why: str) -> Verdict:
    """``verdict`` made not evaluable by the gate ``control``, saying why and what it was judged."""
    detail = f"{why}; as judged: {verdict.effect or verdict.detail}"
    return replace(verdict, status=NOT_EVALUABLE, detail=detail, control=control, holds=None)


def _trained_baselines(verdict: Verdict) -> Verdict:
    """Not evaluable when a bits comparison's verdict could be the budget's: the side whose under-training
    flatters it (a reproduced claim's baseline, a not-reproduced claim's claimed-better side) still gained
    :data:`BASELINE_GAIN` of the margin or more over its last fifth of training."""
    reading = _READING.get(verdict.status, (1 if verdict.holds else -1) if verdict.status == INDICATIVE else 0)
    if reading == 0:
        return verdict
    for m in verdict.margins:
        if m.status != reading:
            continue
        gain = m.gains[1] if reading > 0 else m.gains[0]
        if not math.isnan(gain) and gain >= BASELINE_GAIN * abs(m.mean):
            side = "baseline" if reading > 0 else "claimed-better side"
            where = f" at {m.cell}" if m.cell else ""
            return _stopped(
                verdict,
                f"trained {side}",
                f"the {side}{where} still gained {gain:.3g} bits over its last fifth of training, at least "
                f"{BASELINE_GAIN:g} of the margin {m.mean:+.3g}: the verdict may be the budget's",
            )
    return verdict


def failed_text(names: list[str]) -> str:
    """``precondition P1 fails`` / ``preconditions P1, P2 fail``."""
    return f"precondition {names[0]} fails" if len(names) == 1 else f"preconditions {', '.join(names)} fail"


def precondition(check: str, runs: pd.DataFrame, cell_keys: list[str]) -> Verdict:
    """A precondition judged alone, on the seed means of the seeds that complete it: *reproduced* (it
    holds), *not reproduced* (it does not) or *not evaluable*; the detail gives each value ± its sd."""
    frames, means = _paired(runs, cell_keys, [check])
    return _gate(check, means, frames, cell_keys)


def _paired(runs: pd.DataFrame, cell_keys: list[str], checks: list[str]) -> tuple[list[pd.DataFrame], pd.DataFrame]:
    """(each complete seed's runs, the seed means of those runs) for ``checks``."""
    runs = runs.reset_index(drop=True)  # rows are told apart by position
    seeds = _complete_seeds(runs, cell_keys, [sel for c in checks for sel in claims.parse(c)[1]])
    frames = [runs[_seeds(runs) == seed] for seed in seeds]
    return frames, seed_means(pd.concat(frames), cell_keys) if len(frames) > 1 else frames[0]


def _gate(check: str, means: pd.DataFrame, frames: list[pd.DataFrame], cell_keys: list[str]) -> Verdict:
    """A precondition's status: it holds only when it holds on every seed of ``frames`` (a gate, not a
    finding: no noise rule, and never on a seed mean, which can pass with seeds that failed); the detail
    gives its values' spread and the seeds it fails on."""
    verdict = _judge(check, means, [means], cell_keys, CONFIDENCE, gate=True)
    if verdict.status == NOT_EVALUABLE or len(frames) < 2:
        return verdict
    verdict.detail = _judge(check, means, frames, cell_keys, CONFIDENCE, gate=True).detail
    verdict.seeds = len(frames)
    each = [_judge(check, frame, [frame], cell_keys, CONFIDENCE, gate=True).status for frame in frames]
    failing = [str(_seeds(frame).iloc[0]) for frame, status in zip(frames, each) if status != REPRODUCED]
    verdict.status = NOT_REPRODUCED if failing else REPRODUCED
    if failing:
        verdict.detail += f"; fails on seed{'s' * (len(failing) > 1)} {', '.join(failing)} of {len(frames)}"
    return verdict


def seed_means(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per grid cell (grid order): the numeric summary columns averaged over the cell's finished
    seeds (all of them while none has finished), the rest (run id, lists) of its first seed; ``seeds`` =
    how many were averaged, ``<metric> sd`` their standard deviation, ``ran_alone`` whether every one did.
    The one seed-means function of tables, figures and claims."""
    if rows.empty:
        return rows
    rows = rows.reset_index(drop=True)  # seeds' frames concatenated repeat their indices
    present = [k for k in keys if k in rows]
    label = rows[present].astype(str).agg(",".join, axis=1) if present else pd.Series("", rows.index)
    finished = rows["status"] == "finished"
    done = rows[finished | ~finished.groupby(label).transform("any")]  # a cell's finished seeds, if any
    cell = label[done.index]
    first = ~cell.duplicated()  # each cell's first seed, in grid order
    order = cell[first]
    counts = cell.value_counts(sort=False).reindex(order).to_numpy()
    out = done[first].reset_index(drop=True)
    multi = pd.Series(counts > 1)
    if multi.any():
        numeric = [c for c in done.select_dtypes("number").columns if c not in keys and c != SEED]
        groups = done.groupby(cell, sort=False)
        means = groups[numeric].mean().reindex(order).reset_index(drop=True)
        sds = groups[numeric].std(ddof=1).reindex(order).reset_index(drop=True)
        # every column at once: assigning ~100 summary columns one by one fragments the frame
        averaged = pd.DataFrame({c: out[c].where(~multi, means[c]) for c in numeric})
        out = pd.concat([out.drop(columns=numeric), averaged, sds.where(multi).add_suffix(" sd")], axis=1)
        out = out[[*[c for c in done.columns if c in out], *[c for c in out if c not in done.columns]]]
        if "ran_alone" in done:
            alone = done["ran_alone"].astype(object).where(done["ran_alone"].notna(), False).astype(bool)
            every = alone.groupby(cell, sort=False).all().reindex(order).reset_index(drop=True)
            out["ran_alone"] = out["ran_alone"].astype(object).where(~multi, every)
    return out.assign(seeds=counts)


def _seeds(runs: pd.DataFrame) -> pd.Series:
    return runs[SEED] if SEED in runs else pd.Series(0, index=runs.index)


def _complete_seeds(runs: pd.DataFrame, cell_keys: list[str], selections: list[claims.Selection]) -> list:
    """The seeds whose runs complete every selection (finished, the metric stored, every cell there, and
    for a timing metric every run alone); when none does, the first seed (its selections then say what is
    missing)."""
    seed_of = _seeds(runs)
    keys = [k for k in cell_keys if k in runs]
    label = runs[keys].astype(str).agg("\x1f".join, axis=1) if keys else pd.Series("", index=runs.index)
    wanted = []  # per selection: the rows of every seed it selects, and how many cells they span
    for metric, filters in selections:
        try:
            every = _matching(runs, cell_keys, filters).index
        except NotEvaluable:
            return list(dict.fromkeys(seed_of))[:1]
        wanted.append((metric, filters, every, label[every].nunique()))

    def complete(frame: pd.DataFrame) -> bool:
        for metric, filters, every, cells in wanted:
            rows = frame.loc[frame.index.intersection(every)]
            if (
                rows.empty
                or (rows["status"] != "finished").any()
                or metric not in rows
                or rows[metric].isna().any()
                or label[rows.index].nunique() != cells
            ):
                return False
            if metric in TIMED:
                try:
                    _check_alone(rows, metric, filters)
                except NotEvaluable:
                    return False
        return True

    seeds = [seed for seed, frame in runs.groupby(seed_of, sort=False) if complete(frame)]
    return seeds or list(dict.fromkeys(seed_of))[:1]


def _judge(
    check: str,
    means: pd.DataFrame,
    frames: list[pd.DataFrame],
    cell_keys: list[str],
    confidence: float,
    gate: bool = False,
) -> Verdict:
    """The verdict of ``check`` on the seed means ``means``, its noise from the per-seed ``frames``."""
    tree, selections = claims.parse(check)
    n = len(frames)
    try:
        mean = {f"_s{i}": _select(means, cell_keys, m, f) for i, (m, f) in enumerate(selections)}
        per_seed = [{f"_s{i}": _select(fr, cell_keys, m, f) for i, (m, f) in enumerate(selections)} for fr in frames]
        margins: list[Margin] = []
        judge = _Judge(mean, per_seed, confidence, margins, _gains(means, cell_keys, selections))
        status = judge.status(tree.body)
        deciding = judge.decide(tree.body)
    except NotEvaluable as why:
        return Verdict(NOT_EVALUABLE, str(why))
    except ZeroDivisionError:
        return Verdict(NOT_EVALUABLE, "a stored value divides by zero")
    shown_values = "; ".join(  # a selection the check names twice is shown once
        dict.fromkeys(
            f"{shown(m, f)} = {_spread(mean[f'_s{i}'], [p[f'_s{i}'] for p in per_seed])}"
            for i, (m, f) in enumerate(selections)
        )
    )
    detail = shown_values
    if n > 1 and margins and not gate:
        detail += "; margin " + "; ".join(m.text() for m in margins)
    if not gate:
        detail += "; one seed" if n == 1 else f"; {n} seeds, paired"
    if isinstance(status, pd.Series) and len(status) > 1:  # cell by cell: the cells it does not pass
        for word, level in (("fails at", -1), ("within noise at", 0)):
            cells = [str(k) for k, s in status.items() if s == level]
            detail += f"; {word} {', '.join(cells)}" if cells else ""
    overall = int(_as_series(status).min())
    used = frozenset(
        run
        for frame in frames
        if "run_id" in frame
        for _, f in selections
        for run in _matching(frame, cell_keys, f)["run_id"]
    )
    if n == 1 and not gate:
        return Verdict(INDICATIVE, detail, n, margins, holds=overall > 0, deciding=deciding, runs=used)
    return Verdict(_STATUS[overall], detail, n, margins, deciding=deciding, runs=used)


def _gains(means: pd.DataFrame, cell_keys: list[str], selections: list[claims.Selection]):
    """``gain(i)``: the last-fifth gain (:data:`GAIN`) of the runs selection ``i`` names when it selects bits
    (a number, or a Series by cell); None where it selects no bits or the runs carry no gain."""

    def gain(i: int) -> Any:
        metric, filters = selections[i]
        if metric not in BITS or GAIN not in means:
            return None
        try:
            return _select(means, cell_keys, GAIN, filters)
        except NotEvaluable:
            return None

    return gain


class _Judge:
    """+1 (holds beyond the noise), -1 (fails beyond it) or 0 (within it) of a boolean node, per cell
    where it compares cells; collects each comparison's :class:`Margin`."""

    def __init__(self, mean: dict[str, Any], per_seed: list[dict[str, Any]], confidence: float, margins: list, gain):
        self.mean, self.per_seed, self.c, self.margins, self.gain = mean, per_seed, confidence, margins, gain
        self.comparisons = 0
        self.parts: dict[int, tuple[int, int]] = {}  # a Compare node's margins: (first, end) in self.margins

    def decide(self, node: ast.AST, strongest: bool = False) -> int | None:
        """The margin that decided ``node``: ``and``'s (and ``all``'s, and a cell-wise comparison's) weakest
        part, ``or``'s (and ``any``'s) strongest; None where no margin was measured."""

        def rank(i: int) -> tuple:
            m = self.margins[i]
            return (m.status, -(m.p_holds if not math.isnan(m.p_holds) else 0.5), -m.comparison)

        if isinstance(node, ast.BoolOp):
            picks = [i for i in (self.decide(v) for v in node.values) if i is not None]
            pick = max if isinstance(node.op, ast.Or) else min
            return pick(picks, key=rank) if picks else None
        if isinstance(node, ast.UnaryOp):
            return self.decide(node.operand, not strongest)
        if isinstance(node, ast.Call) and node.func.id in ("all", "any") and len(node.args) == 1:
            return self.decide(node.args[0], node.func.id == "any")
        if isinstance(node, ast.Compare) and id(node) in self.parts:
            first, end = self.parts[id(node)]
            if first == end:
                return None
            return (max if strongest else min)(range(first, end), key=rank)
        return None

    def status(self, node: ast.AST) -> Any:
        if isinstance(node, ast.BoolOp):
            parts = [self.status(v) for v in node.values]
            combine = np.minimum if isinstance(node.op, ast.And) else np.maximum
            out = parts[0]
            for part in parts[1:]:
                out = combine(out, part)
            return out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return -self.status(node.operand)
        if isinstance(node, ast.Call) and node.func.id in ("all", "any") and len(node.args) == 1:
            inner = _as_series(self.status(node.args[0]))
            return int(inner.min() if node.func.id == "all" else inner.max())
        if isinstance(node, ast.Compare):
            out: Any = 1
            left = node.left
            first = len(self.margins)
            for op, right in zip(node.ops, node.comparators):
                out = np.minimum(out, self.compared(type(op), left, right))
                left = right
            self.parts[id(node)] = (first, len(self.margins))
            return out
        value = _eval(node, self.mean)  # a bare number: its truth on the seed means
        return _as_bool(value).astype(int) * 2 - 1 if isinstance(value, pd.Series) else (1 if value else -1)

    def values(self, node: ast.AST) -> tuple[Any, list[Any]]:
        return _eval(node, self.mean), [_eval(node, p) for p in self.per_seed]

    def compared(self, op: type, left: ast.AST, right: ast.AST) -> Any:
        (lm, ls), (rm, rs) = self.values(left), self.values(right)
        lm, rm = _aligned(lm, rm)
        if op in (ast.Eq, ast.NotEq):
            holds = _COMPARE[op](lm, rm)
            return holds.astype(int) * 2 - 1 if isinstance(holds, pd.Series) else (1 if holds else -1)
        self.comparisons += 1
        band = _band(op, left, right)
        if band is not None:  # abs(x) < k: x's two-sided interval against (-k, k)
            inner, bound = band
            (xm, xs), (km, _) = self.values(inner), self.values(bound)
            return self._cells(xm, xs, km, None, strict=op in (ast.Lt, ast.Gt))
        sign = 1 if op in (ast.Lt, ast.LtE) else -1
        margin = sign * (rm - lm)
        per_seed = [sign * (r - lv) for lv, r in (_aligned(a, b) for a, b in zip(ls, rs))]
        sides = (self._gain_of(left), self._gain_of(right))
        gains = sides if sign > 0 else sides[::-1]  # (the side claimed lower in bits, the baseline)
        return self._cells(margin, per_seed, None, gains, strict=op in (ast.Lt, ast.Gt))

    def _gain_of(self, node: ast.AST) -> Any:
        """The last-fifth gain of a side that is one bits selection (None otherwise)."""
        if isinstance(node, ast.Name) and node.id.startswith("_s"):
            return self.gain(int(node.id[2:]))
        return None

    def _cells(self, mean: Any, per_seed: list[Any], band: Any, gains: Any, strict: bool) -> Any:
        def at(value: Any, k: Any) -> float:
            if isinstance(value, pd.Series):
                return float(value.get(k, math.nan)) if k is not None else math.nan
            return math.nan if value is None else float(value)

        pair = gains or (None, None)
        if isinstance(mean, pd.Series):
            table = pd.concat([_as_series(p).reindex(mean.index) for p in per_seed], axis=1)
            bands = band.reindex(mean.index) if isinstance(band, pd.Series) else {k: band for k in mean.index}
            out = [
                self._one(
                    str(k),
                    float(mean[k]),
                    [float(v) for v in table.loc[k]],
                    bands[k],
                    strict,
                    (at(pair[0], k), at(pair[1], k)),
                )
                for k in mean.index
            ]
            return pd.Series(out, index=mean.index)
        return self._one(
            "", float(mean), [float(p) for p in per_seed], band, strict, (at(pair[0], None), at(pair[1], None))
        )

    def _one(self, cell: str, m: float, seeds: list[float], band: Any, strict: bool, gains: tuple) -> int:
        n = len(seeds)
        se = float(np.std(seeds, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
        spread = n > 1 and se > 0 and not math.isnan(se)
        # one-sided bounds at c: a directional claim's interval, and a band's TOST (the 2c - 1 interval)
        half = t_quantile(self.c, n - 1) * se if spread else 0.0
        lower, upper = m - half, m + half
        k = None if band is None else float(band)
        if k is not None:  # a band: inside (-k, k), or wholly outside it
            inside = (-k < lower and upper < k) if strict else (-k <= lower and upper <= k)
            status = 1 if inside else -1 if (lower >= k or upper <= -k or half == 0) else 0
        elif half == 0:  # no spread: the sign decides
            status = 1 if (m > 0 if strict else m >= 0) else -1
        else:
            status = 1 if (lower > 0 if strict else lower >= 0) else -1 if (upper <= 0 if strict else upper < 0) else 0
        p_holds, p_fails = _p_values(m, se, n, k, status) if n > 1 else (math.nan, math.nan)
        mde = detectable(n, self.c) * se if n > 1 else math.nan
        self.margins.append(
            Margin(self.comparisons - 1, cell, m, lower, upper, n, k, status, p_holds, p_fails, mde, gains)
        )
        return status


def _p_values(m: float, se: float, n: int, k: float | None, status: int) -> tuple[float, float]:
    """(p of "holds", p of "fails"), one-sided at n - 1 degrees of freedom; a band's "holds" is the TOST's
    larger p, its "fails" the one-sided p of lying beyond the nearer edge. No spread: 0 for the reading
    the sign gave, 1 for the other."""
    if not se > 0:
        return (0.0, 1.0) if status > 0 else (1.0, 0.0)
    from scipy.special import stdtr  # the t distribution's CDF (scipy imported here, as t_quantile does)

    df = n - 1
    if k is None:
        return float(1 - stdtr(df, m / se)), float(stdtr(df, m / se))
    inside = max(float(1 - stdtr(df, (m + k) / se)), float(stdtr(df, (m - k) / se)))
    beyond = float(1 - stdtr(df, (m - k) / se)) if m >= 0 else float(stdtr(df, (m + k) / se))
    return inside, beyond


def t_quantile(confidence: float, df: int) -> float:
    """Student's one-sided t quantile for ``confidence`` at ``df`` degrees of freedom."""
    from scipy.special import stdtrit  # here: scipy is slow to import, and only judging needs it

    return float(stdtrit(df, confidence))


def detectable(n: int, confidence: float = CONFIDENCE) -> float:
    """The minimum detectable effect at :data:`POWER` with ``n`` seeds, in standard errors of the mean margin:
    ``t(c, n - 1) + t(POWER, n - 1)``."""
    return t_quantile(confidence, n - 1) + t_quantile(POWER, n - 1)


def _band(op: type, left: ast.AST, right: ast.AST) -> tuple[ast.AST, ast.AST] | None:
    """(x, k) of ``abs(x) < k`` (or ``k > abs(x)``), else None."""

    def is_abs(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and node.func.id == "abs" and len(node.args) == 1

    if op in (ast.Lt, ast.LtE) and is_abs(left):
        return left.args[0], right
    if op in (ast.Gt, ast.GtE) and is_abs(right):
        return right.args[0], left
    return None


def _aligned(a: Any, b: Any) -> tuple[Any, Any]:
    if isinstance(a, pd.Series) and isinstance(b, pd.Series):
        if set(a.index) != set(b.index):
            raise NotEvaluable(f"cells differ: {sorted(a.index)} vs {sorted(b.index)}")
        b = b.reindex(a.index)
    return a, b


def _spread(mean: Any, per_seed: list[Any]) -> str:
    """A selection's seed means, with their standard deviation where there are several seeds."""
    if len(per_seed) < 2:
        return _fmt(mean)
    if isinstance(mean, pd.Series):
        sd = pd.concat([_as_series(p).reindex(mean.index) for p in per_seed], axis=1).std(axis=1, ddof=1)
        return "{" + ", ".join(f"{k}: {v:.4g} ± {e:.2g}" for k, v, e in zip(mean.index, mean, sd)) + "}"
    return f"{float(mean):.4g} ± {float(np.std([float(p) for p in per_seed], ddof=1)):.2g}"


def _matching(runs: pd.DataFrame, cell_keys: list[str], filters: dict[str, str]) -> pd.DataFrame:
    """The rows whose cell matches every filter (a key names one grid key, or its dotted suffix)."""
    rows = runs
    for key, value in filters.items():
        matches = matching(key, cell_keys)
        if len(matches) != 1:
            raise NotEvaluable(f"filter key {key!r} matches {len(matches)} grid keys of {cell_keys}")
        rows = rows[rows[matches[0]].astype(str) == value]
    return rows


def _select(runs: pd.DataFrame, cell_keys: list[str], metric: str, filters: dict[str, str]) -> Any:
    rows = _matching(runs, cell_keys, filters)
    used = {c for key in filters for c in matching(key, cell_keys)}
    if rows.empty:
        raise NotEvaluable(f"no run matches {shown(metric, filters)}")
    unfinished = rows[rows["status"] != "finished"]
    if not unfinished.empty:
        raise NotEvaluable(f"{len(unfinished)} run(s) of {shown(metric, filters)} are not finished")
    if metric not in rows or rows[metric].isna().any():
        raise NotEvaluable(f"metric {metric!r} is missing from the runs of {shown(metric, filters)}")
    if metric in TIMED:
        _check_alone(rows, metric, filters)
    numbers = pd.to_numeric(rows[metric], errors="coerce")
    if numbers.isna().any() or isinstance(rows[metric].iloc[0], bool):
        bad = rows[metric][numbers.isna()].iloc[0] if numbers.isna().any() else rows[metric].iloc[0]
        raise NotEvaluable(f"metric {metric!r} of a run of {shown(metric, filters)} is {str(bad)[:40]!r}, not a number")
    free = [c for c in cell_keys if c not in used]
    if len(rows) == 1:
        return float(numbers.iloc[0])
    if not free:
        raise NotEvaluable(f"{len(rows)} runs share the cell of {shown(metric, filters)}")
    index = pd.Series(  # the cell in words: its one free value, or every free key=value
        [value_text(r[free[0]]) if len(free) == 1 else cell_text(r[free].to_dict()) for _, r in rows.iterrows()],
        index=rows.index,
    )
    if not index.is_unique:
        raise NotEvaluable(
            f"several runs share a cell of {shown(metric, filters)}: {sorted(index[index.duplicated()])}"
        )
    return pd.Series(numbers.astype(float).values, index=index)


def _check_alone(rows: pd.DataFrame, metric: str, filters: dict[str, str]) -> None:
    """NotEvaluable unless every run of a timing selection ran alone (see the module docstring)."""
    what = shown(metric, filters)
    alone = rows["ran_alone"] if "ran_alone" in rows else pd.Series([None] * len(rows), index=rows.index)
    unknown = int(alone.isna().sum())
    if unknown:
        raise NotEvaluable(
            f"{what}: {unknown} of {len(rows)} run(s) have no load record (stored before the load "
            "was recorded); a timing claim needs runs that ran alone"
        )
    shared = rows[~alone.astype(bool)]
    if not shared.empty:
        others = shared["others_cores_max"] if "others_cores_max" in shared else pd.Series(dtype=float)
        loads = shared["load_average_max"] if "load_average_max" in shared else pd.Series(dtype=float)
        cpus = shared["cpus"].iloc[0] if "cpus" in shared else "?"
        steal = shared["steal_cores_max"] if "steal_cores_max" in shared else pd.Series(dtype=float)
        measured = (
            f"other processes kept up to {others.max():.2f} of {cpus} cores busy"
            + (f", the hypervisor's steal up to {steal.max():.2f}" if steal.notna().any() else "")
            if others.notna().any()
            else f"1-minute load up to {loads.max():.2f} on {cpus} cores"
        )
        raise NotEvaluable(
            f"{what}: {len(shared)} of {len(rows)} run(s) shared the machine ({measured}); a timing claim "
            "needs runs that ran alone"
        )


def _eval(node: ast.AST, values: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_eval(node.left, values), _eval(node.right, values))
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, values)
        return -operand if isinstance(node.op, ast.USub) else ~_as_bool(operand)
    if isinstance(node, ast.BoolOp):
        parts = [_as_bool(_eval(v, values)) for v in node.values]
        out = parts[0]
        for part in parts[1:]:
            out = (out & part) if isinstance(node.op, ast.And) else (out | part)
        return out
    if isinstance(node, ast.Compare):
        left, out = _eval(node.left, values), True
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, values)
            left, right = _aligned(left, right)
            out = out & _COMPARE[type(op)](left, right)
            left = right
        return out
    if isinstance(node, ast.Call):
        return _FUNCTIONS[node.func.id](*(_eval(a, values) for a in node.args))
    raise AssertionError(type(node))  # claims.parse admits nothing else


def _as_series(value: Any) -> pd.Series:
    return value if isinstance(value, pd.Series) else pd.Series([value])


def _as_bool(value: Any) -> Any:
    return value.astype(bool) if isinstance(value, pd.Series) else pd.Series([bool(value)])


def _fmt(value: Any) -> str:
    if isinstance(value, pd.Series):
        return "{" + ", ".join(f"{k}: {v:.4g}" for k, v in value.items()) + "}"
    return f"{value:.4g}"


def adjusted(p_values: list[float], alpha: float = 1 - CONFIDENCE) -> tuple[list[bool], list[bool]]:
    """Which of a family's tests stay significant at ``alpha`` after adjusting for their number: (Holm's
    step-down, which bounds the family-wise error; Benjamini-Hochberg's step-up, which bounds the false
    discovery rate). One entry per p value, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    holm, bh = [False] * m, [False] * m
    for rank, i in enumerate(order):  # Holm: reject in order while p_(k) <= alpha / (m - k)
        if p_values[i] > alpha / (m - rank):
            break
        holm[i] = True
    passing = [rank for rank, i in enumerate(order) if p_values[i] <= alpha * (rank + 1) / m]
    for rank, i in enumerate(order):  # BH: reject every p up to the largest p_(k) <= k alpha / m
        bh[i] = bool(passing) and rank <= passing[-1]
    return holm, bh


def power_note(seeds: int, confidence: float = CONFIDENCE) -> str:
    """What ``seeds`` replicates can decide, before any run: the margin, in per-seed standard deviations of
    the margin, that a t-judged claim must clear, and the true margin it finds at :data:`POWER`."""
    if seeds < 2:
        return "1 seed per cell: every claim is indicative only (no spread to judge it by); --seeds 3 judges them"
    decide = t_quantile(confidence, seeds - 1) / math.sqrt(seeds)
    detect = detectable(seeds, confidence) / math.sqrt(seeds)
    more = seeds + 1
    detect_more = detectable(more, confidence) / math.sqrt(more)
    return (
        f"{seeds} seeds per cell: a claim is decided only when its mean margin clears {decide:.2f} x the sd of "
        f"its per-seed margins, and a true margin is found at {POWER:.0%} power only from {detect:.2f} sd "
        f"({more} seeds: {detect_more:.2f} sd); smaller ones read within noise, uninformative"
    )
