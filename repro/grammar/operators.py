"""The comparison operators of the claim language, one row each: how a comparison's *margin* is computed
from its two sides (positive favours the claim) and which rule judges it. Adding an operator is adding a
row here (and a test); :mod:`repro.grammar.language` admits exactly these.

Rules, on the mean margin m over n seeds with standard error SE (m is the mean of the per-seed margins,
so a claim on ``max``/``min`` is centred where its spread is measured):

- **directional** (``<``, ``<=``, ``>``, ``>=``): a one-sided paired t interval at the confidence c, the
  bounds ``m ± t(c, n - 1) · SE``: *holds* when the lower bound clears 0 (reaches it, for ``<=``/``>=``),
  *fails* when the upper bound falls short of it, *within noise* otherwise;
- **band** (``abs(x) < k``, written either way round): two one-sided tests at 1 - c (the two-sided
  2c - 1 interval of x): *holds* inside (-k, k), *fails* wholly outside it;
- **exact** (``==``, ``!=``): on the seed means, for counts.

No spread: the sign decides (a band: inside or not).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DIRECTIONAL, BAND, EXACT = "directional", "band", "exact"


@dataclass(frozen=True)
class Operator:
    symbol: str
    rule: str  # DIRECTIONAL, or EXACT (a band is a directional operator with abs() on one side)
    strict: bool  # does a margin of exactly 0 fail (``<``) or hold (``<=``)?
    sign: int  # the margin: sign * (right - left)
    truth: Callable[[Any, Any], Any]  # the plain comparison, on values

    def margin(self, left: Any, right: Any) -> Any:
        return self.sign * (right - left)

    def reads(self, lower: float, upper: float, spread: bool) -> int:
        """+1 holds, -1 fails, 0 within noise, from the margin's one-sided bounds (equal without spread)."""
        if not spread:
            return 1 if (lower > 0 if self.strict else lower >= 0) else -1
        if lower > 0 if self.strict else lower >= 0:
            return 1
        return -1 if (upper <= 0 if self.strict else upper < 0) else 0

    def band_reads(self, lower: float, upper: float, k: float, spread: bool) -> int:
        """A band's reading: its interval of x inside (-k, k) holds, wholly outside fails."""
        inside = (-k < lower and upper < k) if self.strict else (-k <= lower and upper <= k)
        return 1 if inside else -1 if (lower >= k or upper <= -k or not spread) else 0


OPERATORS: dict[type, Operator] = {
    ast.Lt: Operator("<", DIRECTIONAL, True, 1, operator.lt),
    ast.LtE: Operator("<=", DIRECTIONAL, False, 1, operator.le),
    ast.Gt: Operator(">", DIRECTIONAL, True, -1, operator.gt),
    ast.GtE: Operator(">=", DIRECTIONAL, False, -1, operator.ge),
    ast.Eq: Operator("==", EXACT, False, 0, operator.eq),
    ast.NotEq: Operator("!=", EXACT, False, 0, operator.ne),
}


def band(op: type, left: ast.AST, right: ast.AST) -> tuple[ast.AST, ast.AST] | None:
    """(x, k) of ``abs(x) < k`` (or ``k > abs(x)``), else None."""

    def is_abs(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and node.func.id == "abs" and len(node.args) == 1

    if OPERATORS[op].sign > 0 and is_abs(left):
        return left.args[0], right
    if OPERATORS[op].sign < 0 and is_abs(right):
        return right.args[0], left
    return None
