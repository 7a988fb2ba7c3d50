"""Claims: a paper's findings written as checks over a manifest's runs.

A check is an arithmetic/boolean expression over *selections*::

    avg_span[span.kind=adaptive, span.limit=4096] < 0.25 * 4096
    valid_bits[span.kind=adaptive] <= valid_bits[span.kind=fixed]

``metric[key=value, ...]`` picks the runs whose grid cell matches every filter (a key matches a cell key
equal to it or ending in ``.key``) and yields their ``metric`` (a ``summary.json`` key), indexed by the
grid keys the filters left free, in grid order. Two selections compare cell by cell on that index, so the
second line holds when adaptive beats fixed at every span limit; a cell with two runs is an error, never
paired by position. A selection of one run is a number. Functions: mean, min, max, abs, all, any, and
first/last (the value at the first/last cell in grid order, e.g. the smallest and largest S).

``learned[key=value, ...]`` is the suite's one definition of "the model learned the data" (``LEARNED``):
each selected run's valid bits below 0.8 times the unigram bits of its data (``learned_test[...]``: its
test bits, where only the test split is scored).

A claim may carry preconditions (``requires``), checks in the same language that must hold for the claim
to say anything (the spans moved, the baseline uses its context, the model learned the data). The claim
is reproduced when its expression is true everywhere; when a precondition does not hold it is *not
evaluable*, with the failed precondition and its numbers.

A timing metric (:data:`TIMED`) counts only from runs whose summary says they ran alone (``ran_alone``:
the 1-minute load average sampled over training stayed within the run's own threads); a run that
shared the machine, or one stored before the load was recorded, makes the claim not evaluable, saying
which and at what load. Peak memory is the process's own high-water mark, which other processes do
not move, so it needs no such record.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from repro.config.cells import cell_text, value_text
from repro.errors import UserError

# "The model learned the data", one definition for every manifest: its bits (valid, or test where only
# the test split is scored) below LEARNED_FRACTION of the unigram bits of its data, run by run.
LEARNED_FRACTION = 0.8
LEARNED = {"learned": "valid_bits", "learned_test": "test_bits"}
_LEARNED = re.compile(r"\b(learned_test|learned)\[([^\[\]]*)\]")
_SELECTION = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)\[([^\[\]]*)\]")
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


TIMED = ("seconds_per_step", "train_seconds", "model_flops_per_second", "mfu")


class ClaimError(UserError):
    pass


class NotEvaluable(Exception):
    """The runs a claim needs are missing or unfinished."""


@dataclass
class Verdict:
    status: str  # reproduced | not reproduced | not evaluable
    detail: str  # the numbers behind it


def parse(check: str) -> tuple[ast.Expression, list[tuple[str, dict[str, str]]]]:
    """Parse a check into an AST whose names ``_s0, _s1, ...`` stand for its selections."""
    selections: list[tuple[str, dict[str, str]]] = []

    def replace(match: re.Match) -> str:
        filters = {}
        for part in filter(None, (p.strip() for p in match.group(2).split(","))):
            key, eq, value = part.partition("=")
            if not eq or not key.strip() or not value.strip():
                raise ClaimError(f"claim {check!r}: filter {part!r} is not key=value")
            filters[key.strip()] = value.strip()
        selections.append((match.group(1), filters))
        return f"_s{len(selections) - 1}"

    def learned(match: re.Match) -> str:
        f = match.group(2)
        return f"({LEARNED[match.group(1)]}[{f}] < {LEARNED_FRACTION} * unigram_bits[{f}])"

    try:
        tree = ast.parse(_SELECTION.sub(replace, _LEARNED.sub(learned, check)), mode="eval")
    except SyntaxError as err:
        raise ClaimError(f"claim {check!r} does not parse: {err.msg}") from None
    for node in ast.walk(tree):
        allowed = (
            ast.Expression,
            ast.BinOp,
            ast.UnaryOp,
            ast.Compare,
            ast.BoolOp,
            ast.Call,
            ast.Name,
            ast.Constant,
            ast.Load,
            ast.And,
            ast.Or,
            ast.Not,
            ast.USub,
            *_BINARY,
            *_COMPARE,
        )
        if not isinstance(node, allowed):
            raise ClaimError(f"claim {check!r}: {type(node).__name__} is not allowed in a check")
        if isinstance(node, ast.Name) and not (node.id.startswith("_s") or node.id in _FUNCTIONS):
            raise ClaimError(f"claim {check!r}: unknown name {node.id!r} (write metric[key=value])")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS):
            raise ClaimError(f"claim {check!r}: only {', '.join(_FUNCTIONS)} may be called")
        if isinstance(node, ast.Constant) and (
            isinstance(node.value, bool) or not isinstance(node.value, (int, float))
        ):
            raise ClaimError(f"claim {check!r}: constant {node.value!r} is not a number")
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant)
            and node.right.value == 0
        ):
            raise ClaimError(f"claim {check!r}: division by zero")
    return tree, selections


def evaluate(check: str, runs: pd.DataFrame, cell_keys: list[str], requires: list[str] = ()) -> Verdict:
    """Judge ``check`` over ``runs`` (one row per run in grid order: ``status``, the cell keys, the summary
    metrics), after its preconditions ``requires``."""
    for precondition in requires:
        if precondition == check:  # a claim that the models learned is no precondition of itself
            continue
        verdict = _judge(precondition, runs, cell_keys)
        if verdict.status != "reproduced":
            why = "does not hold" if verdict.status == "not reproduced" else "cannot be checked"
            return Verdict("not evaluable", f"precondition `{precondition}` {why}: {verdict.detail}")
    return _judge(check, runs, cell_keys)


def _judge(check: str, runs: pd.DataFrame, cell_keys: list[str]) -> Verdict:
    tree, selections = parse(check)
    try:
        values = {f"_s{i}": _select(runs, cell_keys, metric, filters) for i, (metric, filters) in enumerate(selections)}
        result = _eval(tree.body, values)
    except NotEvaluable as why:
        return Verdict("not evaluable", str(why))
    except ZeroDivisionError:
        return Verdict("not evaluable", "a stored value divides by zero")
    shown = "; ".join(  # a selection the check names twice is shown once
        dict.fromkeys(f"{_shown(m, f)} = {_fmt(values[f'_s{i}'])}" for i, (m, f) in enumerate(selections))
    )
    holds = bool(_as_series(result).all()) if isinstance(result, pd.Series) else bool(result)
    if not holds and isinstance(result, pd.Series) and len(result) > 1:
        shown += f"; fails at {', '.join(str(k) for k, ok in result.items() if not ok)}"
    return Verdict("reproduced" if holds else "not reproduced", shown)


def filter_keys(check: str, cell_keys: list[str]) -> list[tuple[str, str, str | None]]:
    """``(key, value, grid key)`` for every filter of ``check``; the grid key is None unless the key names
    exactly one of ``cell_keys`` (what ``repro validate`` refuses)."""
    out = []
    for _, filters in parse(check)[1]:
        for key, value in filters.items():
            matches = [c for c in cell_keys if c == key or c.endswith("." + key)]
            out.append((key, value, matches[0] if len(matches) == 1 else None))
    return out


def _select(runs: pd.DataFrame, cell_keys: list[str], metric: str, filters: dict[str, str]) -> Any:
    rows = runs
    used = set()
    for key, value in filters.items():
        matches = [c for c in cell_keys if c == key or c.endswith("." + key)]
        if len(matches) != 1:
            raise NotEvaluable(f"filter key {key!r} matches {len(matches)} grid keys of {cell_keys}")
        used.add(matches[0])
        rows = rows[rows[matches[0]].astype(str) == value]
    if rows.empty:
        raise NotEvaluable(f"no run matches {_shown(metric, filters)}")
    unfinished = rows[rows["status"] != "finished"]
    if not unfinished.empty:
        raise NotEvaluable(f"{len(unfinished)} run(s) of {_shown(metric, filters)} are not finished")
    if metric not in rows or rows[metric].isna().any():
        raise NotEvaluable(f"metric {metric!r} is missing from the runs of {_shown(metric, filters)}")
    if metric in TIMED:
        _check_alone(rows, metric, filters)
    numbers = pd.to_numeric(rows[metric], errors="coerce")
    if numbers.isna().any() or isinstance(rows[metric].iloc[0], bool):
        bad = rows[metric][numbers.isna()].iloc[0] if numbers.isna().any() else rows[metric].iloc[0]
        raise NotEvaluable(
            f"metric {metric!r} of a run of {_shown(metric, filters)} is {str(bad)[:40]!r}, not a number"
        )
    free = [c for c in cell_keys if c not in used]
    if len(rows) == 1:
        return float(numbers.iloc[0])
    if not free:
        raise NotEvaluable(f"{len(rows)} runs share the cell of {_shown(metric, filters)}")
    index = pd.Series(  # the cell in words: its one free value, or every free key=value
        [value_text(r[free[0]]) if len(free) == 1 else cell_text(r[free].to_dict()) for _, r in rows.iterrows()],
        index=rows.index,
    )
    if not index.is_unique:
        raise NotEvaluable(
            f"several runs share a cell of {_shown(metric, filters)}: {sorted(index[index.duplicated()])}"
        )
    return pd.Series(numbers.astype(float).values, index=index)


def _shown(metric: str, filters: dict[str, str]) -> str:
    """A selection as the check writes it: ``valid_bits[kind=adaptive]``."""
    return f"{metric}[{', '.join(f'{k}={v}' for k, v in filters.items())}]"


def _check_alone(rows: pd.DataFrame, metric: str, filters: dict[str, str]) -> None:
    """NotEvaluable unless every run of a timing selection ran alone (see the module docstring)."""
    what = f"{metric}[{', '.join(f'{k}={v}' for k, v in filters.items())}]"
    alone = rows["ran_alone"] if "ran_alone" in rows else pd.Series([None] * len(rows), index=rows.index)
    unknown = int(alone.isna().sum())
    if unknown:
        raise NotEvaluable(
            f"{what}: {unknown} of {len(rows)} run(s) have no load record (stored before the load "
            "was recorded); a timing claim needs runs that ran alone"
        )
    shared = rows[~alone.astype(bool)]
    if not shared.empty:
        loads = shared["load_average_max"] if "load_average_max" in shared else pd.Series(dtype=float)
        cpus = shared["cpus"].iloc[0] if "cpus" in shared else "?"
        raise NotEvaluable(
            f"{what}: {len(shared)} of {len(rows)} run(s) shared the machine (1-minute load up to "
            f"{loads.max():.2f} on {cpus} cores); a timing claim needs runs that ran alone"
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
            if isinstance(left, pd.Series) and isinstance(right, pd.Series):
                if set(left.index) != set(right.index):
                    raise NotEvaluable(f"cells differ: {sorted(left.index)} vs {sorted(right.index)}")
                right = right.reindex(left.index)
            out = out & _COMPARE[type(op)](left, right)
            left = right
        return out
    if isinstance(node, ast.Call):
        return _FUNCTIONS[node.func.id](*(_eval(a, values) for a in node.args))
    raise AssertionError(type(node))  # parse() admits nothing else


def _as_series(value: Any) -> pd.Series:
    return value if isinstance(value, pd.Series) else pd.Series([value])


def _as_bool(value: Any) -> Any:
    return value.astype(bool) if isinstance(value, pd.Series) else pd.Series([bool(value)])


def _fmt(value: Any) -> str:
    if isinstance(value, pd.Series):
        return "{" + ", ".join(f"{k}: {v:.4g}" for k, v in value.items()) + "}"
    return f"{value:.4g}"
