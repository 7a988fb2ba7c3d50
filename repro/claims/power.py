"""Power: what a claim's seeds can decide, against the smallest effect it cares about.

Each claim may declare ``sesoi:``, its smallest effect of interest, in the unit of its margin; without one
it takes its metric's default (:func:`default_sesoi`): 0.02 for bits (the size of the bands the bf16 and
position claims use, and below the papers' smallest effect, 0.04 bits), 4 tokens for a span (an eighth of
R = 32), none for the rest. A band's is its half-width k. A verdict *within noise* whose minimum detectable
effect exceeds it is *uninformative*: its seeds could not have decided it.
"""

from __future__ import annotations

import ast
import math
import re

from repro.claims.stats import CONFIDENCE, POWER, detectable, t_quantile
from repro.grammar import language
from repro.grammar.operators import band

SPANS = ("avg_span", "span_max", "span_lower_half", "span_upper_half", "span_growth", "dynamic_span_mean")
DEFAULTS = {"bits": 0.02, "span": 4.0}


def default_sesoi(check: str | language.Check) -> float:
    """The smallest effect of interest of ``check`` when it declares none: its first metric's default."""
    for metric, _ in language.compiled(check).selections:
        if metric.endswith("bits") or "bits." in metric:
            return DEFAULTS["bits"]
        if metric in SPANS:
            return DEFAULTS["span"]
    return math.nan


def of_claim(check: str | language.Check, declared: float = math.nan) -> float:
    """A claim's smallest effect of interest before it is judged: the one it declares, else a band's
    half-width where it is a constant (``abs(x) < 0.05``), else its metric's default."""
    if not math.isnan(declared):
        return declared
    body = language.compiled(check).tree.body
    if isinstance(body, ast.Compare) and len(body.ops) == 1:
        found = band(type(body.ops[0]), body.left, body.comparators[0])
        if found is not None and isinstance(found[1], ast.Constant):
            return float(found[1].value)
    return default_sesoi(check)


def bound(check: str | language.Check, sesoi: float) -> str | language.Check:
    """A premise or control with the name ``sesoi`` bound to the claim's (as it is where it names none, or
    where the claim has none: judging it then says so)."""
    text = language.written(check)
    if math.isnan(sesoi) or not re.search(rf"\b{language.SESOI}\b", text):
        return check
    return re.sub(rf"\b{language.SESOI}\b", f"{sesoi:g}", text)


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
