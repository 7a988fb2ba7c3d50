"""The values of a check's expressions: selections' numbers (or Series by cell) combined by arithmetic, the
language's functions and comparisons, on the seed means or on one seed's runs."""

from __future__ import annotations

import ast
import operator
from typing import Any

import numpy as np
import pandas as pd

from repro.claims.select import NotEvaluable, as_series
from repro.grammar.operators import OPERATORS

_FUNCTIONS = {
    "mean": lambda s: as_series(s).mean(),
    "min": lambda s: as_series(s).min(),
    "max": lambda s: as_series(s).max(),
    "abs": abs,
    "all": lambda s: bool(as_series(s).all()),
    "any": lambda s: bool(as_series(s).any()),
    "first": lambda s: as_series(s).iloc[0],
    "last": lambda s: as_series(s).iloc[-1],
    "best": lambda *args: args[lowest(args)],
    "_later": lambda s: _steps(s, later=True),
    "_earlier": lambda s: _steps(s, later=False),
}


def _steps(value: Any, later: bool) -> pd.Series:
    """The cells of ``value`` after the first (``later``) or before the last, each labelled by its step
    (``128 after 64``): nonincreasing(x) compares the two (repro.grammar.language)."""
    s = as_series(value)
    if len(s) < 2:
        raise NotEvaluable(f"nonincreasing() needs two cells or more, got {len(s)}")
    labels = [f"{b} after {a}" for a, b in zip(s.index[:-1], s.index[1:])]
    return pd.Series((s.values[1:] if later else s.values[:-1]), index=labels)


def lowest(values: tuple[Any, ...]) -> int:
    """The index of the value with the lowest mean (over its cells where it is cell-wise): ``best``'s pick."""
    return min(range(len(values)), key=lambda i: float(as_series(values[i]).mean()))


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def aligned(a: Any, b: Any) -> tuple[Any, Any]:
    if isinstance(a, pd.Series) and isinstance(b, pd.Series):
        if set(a.index) != set(b.index):
            raise NotEvaluable(f"cells differ: {sorted(a.index)} vs {sorted(b.index)}")
        b = b.reindex(a.index)
    return a, b


def spread(mean: Any, per_seed: list[Any]) -> str:
    """A selection's seed means, with their standard deviation where there are several seeds."""
    if len(per_seed) < 2:
        return fmt(mean)
    if isinstance(mean, pd.Series):
        sd = pd.concat([as_series(p).reindex(mean.index) for p in per_seed], axis=1).std(axis=1, ddof=1)
        return "{" + ", ".join(f"{k}: {v:.4g} ± {e:.2g}" for k, v, e in zip(mean.index, mean, sd)) + "}"
    return f"{float(mean):.4g} ± {float(np.std([float(p) for p in per_seed], ddof=1)):.2g}"


def evaluate(node: ast.AST, values: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in values:  # sesoi, where the claim has none to bind it to (repro.claims.power.bound)
            raise NotEvaluable(f"{node.id} is not bound: the claim has no smallest effect of interest (declare sesoi:)")
        return values[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](evaluate(node.left, values), evaluate(node.right, values))
    if isinstance(node, ast.UnaryOp):
        operand = evaluate(node.operand, values)
        return -operand if isinstance(node.op, ast.USub) else ~_as_bool(operand)
    if isinstance(node, ast.BoolOp):
        parts = [_as_bool(evaluate(v, values)) for v in node.values]
        out = parts[0]
        for part in parts[1:]:
            out = (out & part) if isinstance(node.op, ast.And) else (out | part)
        return out
    if isinstance(node, ast.Compare):
        left, out = evaluate(node.left, values), True
        for op, right_node in zip(node.ops, node.comparators):
            right = evaluate(right_node, values)
            left, right = aligned(left, right)
            out = out & OPERATORS[type(op)].truth(left, right)
            left = right
        return out
    if isinstance(node, ast.Call):
        return _FUNCTIONS[node.func.id](*(evaluate(a, values) for a in node.args))
    raise AssertionError(type(node))  # language.parse admits nothing else


def _as_bool(value: Any) -> Any:
    return value.astype(bool) if isinstance(value, pd.Series) else pd.Series([bool(value)])


def fmt(value: Any) -> str:
    if isinstance(value, pd.Series):
        return "{" + ", ".join(f"{k}: {v:.4g}" for k, v in value.items()) + "}"
    return f"{value:.4g}"


def chosen(node: ast.AST, mean: dict[str, Any]) -> tuple[ast.AST, list[ast.AST]]:
    """``node`` with each ``best(x, y, ...)`` replaced by the argument whose seed mean is lowest (chosen once,
    on the means: then paired seed by seed like any selection), and the arguments chosen."""
    picked: list[ast.AST] = []

    class Best(ast.NodeTransformer):
        def visit_Call(self, call: ast.Call) -> ast.AST:
            self.generic_visit(call)
            if call.func.id != "best" or not call.args:
                return call
            pick = call.args[lowest(tuple(evaluate(a, mean) for a in call.args))]
            picked.append(pick)
            return pick

    return Best().visit(ast.parse(ast.unparse(node), mode="eval").body), picked
