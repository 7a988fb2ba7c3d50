"""Judging one check over a manifest's runs: its selections paired seed by seed, each comparison's margin
judged by its operator's rule (:mod:`repro.grammar.operators`), the parts combined.

Replicates (runs of one cell that differ only in ``train.seed``) are judged together, on the seeds whose
runs complete every selection of the check; each comparison has one margin per seed (each seed's runs
compared with the same seed's: paired). One seed has no spread: the verdict is *indicative*.

Combining parts: ``and`` (and ``all``, and the cells of a cell-wise comparison) holds when every part
holds, and fails when one part fails beyond its Bonferroni-corrected level (k parts: p · k); ``or`` (and
``any``) mirrors it. So a claim's error stays at the confidence it states however many parts it has. The
headline effect is the part that decided.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from repro.claims import stats
from repro.claims.select import NotEvaluable, as_series, matching_rows, select
from repro.claims.values import aligned, chosen, evaluate, spread
from repro.claims.verdict import INDICATIVE, NOT_EVALUABLE, STATUS, Margin, Verdict
from repro.grammar import language
from repro.grammar.operators import EXACT, OPERATORS, band


@dataclass
class Reading:
    """A boolean node's reading: +1 holds, -1 fails, 0 within noise; the p values of its two readings;
    the margin (its index) that decided it."""

    status: int
    p_holds: float
    p_fails: float
    deciding: int | None = None

    def negated(self) -> Reading:
        return Reading(-self.status, self.p_fails, self.p_holds, self.deciding)


def combine(parts: list[Reading], every: bool, alpha: float) -> Reading:
    """``and`` (``every``) or ``or`` of ``parts``: the all-side by its weakest part, the any-side by its
    strongest part Bonferroni-corrected for their number."""
    if not every:
        return combine([p.negated() for p in parts], True, alpha).negated()
    k = len(parts)
    weakest = max(parts, key=lambda p: (p.p_holds if not math.isnan(p.p_holds) else 0.5, -p.status))
    failing = min(parts, key=lambda p: (p.p_fails if not math.isnan(p.p_fails) else 2.0, p.status))
    corrected = min(1.0, k * failing.p_fails) if not math.isnan(failing.p_fails) else math.nan
    if all(p.status == 1 for p in parts):
        status, deciding = 1, weakest.deciding
    elif any(
        p.status == -1 and (k == 1 or p.p_fails == 0 or math.isnan(p.p_fails) or k * p.p_fails < alpha) for p in parts
    ):
        status, deciding = -1, failing.deciding
    else:
        status, deciding = 0, (weakest if weakest.status < 1 else failing).deciding
    return Reading(status, max(p.p_holds for p in parts), corrected, deciding)


def judge(
    check: str | language.Check,
    means: pd.DataFrame,
    frames: list[pd.DataFrame],
    cell_keys: list[str],
    confidence: float,
    gate: bool = False,
) -> Verdict:
    """The verdict of ``check`` on the seed means ``means``, its noise from the per-seed ``frames``."""
    parsed = language.compiled(check)
    tree, selections = parsed.tree, parsed.selections
    n = len(frames)
    try:
        mean = {f"_s{i}": select(means, cell_keys, m, f) for i, (m, f) in enumerate(selections)}
        per_seed = [{f"_s{i}": select(fr, cell_keys, m, f) for i, (m, f) in enumerate(selections)} for fr in frames]
        body, picked_best = chosen(tree.body, mean)
        judged = _Judge(mean, per_seed, confidence, [selections[i][0] for i in range(len(selections))])
        reading = judged.read(body)
    except NotEvaluable as why:
        return Verdict(NOT_EVALUABLE, str(why))
    except ZeroDivisionError:
        return Verdict(NOT_EVALUABLE, "a stored value divides by zero")
    margins = judged.margins
    shown_values = "; ".join(  # a selection the check names twice is shown once
        dict.fromkeys(
            f"{language.shown(m, f)} = {spread(mean[f'_s{i}'], [p[f'_s{i}'] for p in per_seed])}"
            for i, (m, f) in enumerate(selections)
        )
    )
    detail = shown_values
    for node in picked_best:  # the baseline best() chose, as the check writes it
        i = _selection(node)
        detail += f"; best: {language.shown(*selections[i]) if i is not None else ast.unparse(node)}"
    if n > 1 and margins and not gate:
        detail += "; margin " + "; ".join(m.text() for m in margins)
    if not gate:
        detail += "; one seed" if n == 1 else f"; {n} seeds, paired"
    cells = [m for m in margins if m.cell]
    if len(cells) > 1:  # cell by cell: the cells it does not pass
        for word, level in (("fails at", -1), ("within noise at", 0)):
            named = [m.cell for m in cells if m.status == level]
            detail += f"; {word} {', '.join(named)}" if named else ""
    picked = [matching_rows(fr, cell_keys, f) for fr in frames if "run_id" in fr for _, f in selections]
    used = frozenset(run for rows in picked for run in rows["run_id"])
    # what they computed (repro.store.computation): the same runs under two ids are one test, not two
    computed = frozenset(c for rows in picked if "computation" in rows for c in rows["computation"].dropna())
    common = dict(
        deciding=reading.deciding, runs=used, computed=computed, p_holds=reading.p_holds, p_fails=reading.p_fails
    )
    if n == 1 and not gate:
        return Verdict(INDICATIVE, detail, n, margins, holds=reading.status > 0, **common)
    return Verdict(STATUS[reading.status], detail, n, margins, **common)


class _Judge:
    """The :class:`Reading` of each boolean node, per cell where it compares cells; collects each
    comparison's :class:`Margin` (in :attr:`margins`)."""

    def __init__(self, mean: dict[str, Any], per_seed: list[dict[str, Any]], confidence: float, metrics: list[str]):
        self.mean, self.per_seed, self.c, self.metrics = mean, per_seed, confidence, metrics
        self.alpha = 1 - confidence
        self.margins: list[Margin] = []
        self.comparisons = 0

    def read(self, node: ast.AST) -> Reading:
        if isinstance(node, ast.BoolOp):
            return combine([self.read(v) for v in node.values], isinstance(node.op, ast.And), self.alpha)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.read(node.operand).negated()
        if isinstance(node, ast.Call) and node.func.id in ("all", "any") and len(node.args) == 1:
            return self.read(node.args[0]) if node.func.id == "all" else self._any(node.args[0])
        if isinstance(node, ast.Compare):
            parts, left = [], node.left
            for op, right in zip(node.ops, node.comparators):
                parts.append(self.compared(type(op), left, right))
                left = right
            return combine(parts, True, self.alpha)
        value = evaluate(node, self.mean)  # a bare truth value: on the seed means
        holds = bool(as_series(value).all()) if isinstance(value, pd.Series) else bool(value)
        return Reading(1 if holds else -1, 0.0 if holds else 1.0, 1.0 if holds else 0.0)

    def _any(self, node: ast.AST) -> Reading:
        """``any`` over a cell-wise comparison: holds at some cell (Bonferroni over the cells)."""
        first = len(self.margins)
        whole = self.read(node)
        cells = [self._leaf(i) for i in range(first, len(self.margins))]
        return combine(cells, False, self.alpha) if cells else whole

    def _leaf(self, i: int) -> Reading:
        m = self.margins[i]
        return Reading(m.status, m.p_holds, m.p_fails, i)

    def compared(self, op: type, left: ast.AST, right: ast.AST) -> Reading:
        rule = OPERATORS[op]
        lm, rm = aligned(evaluate(left, self.mean), evaluate(right, self.mean))
        if rule.rule == EXACT:
            holds = rule.truth(lm, rm)
            holds = bool(as_series(holds).all()) if isinstance(holds, pd.Series) else bool(holds)
            return Reading(1 if holds else -1, 0.0 if holds else 1.0, 1.0 if holds else 0.0)
        self.comparisons += 1
        first = len(self.margins)
        found = band(op, left, right)
        if found is not None:  # abs(x) < k: x's interval against (-k, k)
            inner, bound = found
            xs = [evaluate(inner, p) for p in self.per_seed]
            self._cells(evaluate(inner, self.mean), xs, evaluate(bound, self.mean), rule, (None, None))
        else:
            per_seed = [rule.margin(*aligned(evaluate(left, p), evaluate(right, p))) for p in self.per_seed]
            sides = (_selection(left), _selection(right))
            sides = sides if rule.sign > 0 else sides[::-1]  # (the side claimed lower, the baseline)
            bits = all(s is not None and self.metrics[s] in BITS for s in sides)
            self._cells(rule.margin(lm, rm), per_seed, None, rule, sides if bits else (None, None))
        cells = [self._leaf(i) for i in range(first, len(self.margins))]
        return combine(cells, True, self.alpha)

    def _cells(self, mean: Any, per_seed: list[Any], k: Any, rule, sides: tuple) -> None:
        if not isinstance(mean, pd.Series):
            self._one("", [float(p) for p in per_seed], None if k is None else float(k), rule, sides)
            return
        table = pd.concat([as_series(p).reindex(mean.index) for p in per_seed], axis=1)
        for cell in mean.index:
            kk = k.get(cell) if isinstance(k, pd.Series) else k
            self._one(str(cell), [float(v) for v in table.loc[cell]], None if kk is None else float(kk), rule, sides)

    def _one(self, cell: str, seeds: list[float], k: float | None, rule, sides: tuple) -> None:
        n = len(seeds)
        m = float(np.mean(seeds))  # the mean of the per-seed margins (max/min: centred where the SE is measured)
        se = float(np.std(seeds, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
        spread = n > 1 and se > 0 and not math.isnan(se)
        half = stats.t_quantile(self.c, n - 1) * se if spread else 0.0
        lower, upper = m - half, m + half
        status = rule.reads(lower, upper, spread) if k is None else rule.band_reads(lower, upper, k, spread)
        if n < 2:
            ph, pf = (0.0, 1.0) if status > 0 else (1.0, 0.0)
        elif k is None:
            ph, pf = stats.one_sided(m, se, n)
            if not spread:
                ph, pf = (0.0, 1.0) if status > 0 else (1.0, 0.0)
        else:
            ph, pf = stats.tost(m, se, n, k) if spread else ((0.0, 1.0) if status > 0 else (1.0, 0.0))
        if n > 1:
            mde = (stats.detectable(n, self.c) if k is None else stats.detectable_band(n, self.c)) * se
            two = stats.two_sided(m, se, n) if k is None else ph
            flips = [s if status >= 0 else -s for s in seeds] if k is None else []
            flip = stats.sign_flip(flips) if flips else math.nan
        else:
            mde = two = flip = math.nan
        self.margins.append(
            Margin(
                self.comparisons - 1,
                cell,
                m,
                lower,
                upper,
                n,
                k,
                status,
                ph,
                pf,
                mde,
                tuple(seeds),
                sides,
                two,
                flip,
                se if n > 1 else math.nan,
            )
        )


BITS = ("valid_bits", "test_bits")


def _selection(node: ast.AST) -> int | None:
    """The selection a side is, when it is one bare selection."""
    return int(node.id[2:]) if isinstance(node, ast.Name) and node.id.startswith("_s") else None
