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
no sampled interval of training had other processes keeping more than half a core busy; runs stored
before 2026-12-02 judged it from the 1-minute load average instead); a run that shared the machine, or
one stored before the load was recorded, makes the claim not evaluable, saying which and how much. Peak memory is the process's own high-water mark, which other processes do
not move, so it needs no such record.
Replicates (runs of one cell that differ only in ``train.seed``) are judged together. The seeds used are
those whose runs complete every selection of the claim and its preconditions. Preconditions and the
claim's thresholds apply to the seed means. Each comparison is judged on its *margin* (``b - a`` for
``a < b``): the margin of the seed means, and its standard error from the per-seed margins (each seed's
runs compared with the same seed's: paired). With n >= 2 seeds a comparison holds when the margin exceeds
two standard errors, fails when it is below minus two, and is *within noise* otherwise (a spread of zero:
the sign decides); with one seed the sign decides and the verdict says it was judged on one seed. ``and``
takes the weakest part, ``or`` the strongest, a comparison across cells every cell: the claim is
*reproduced*, *not reproduced* or *within noise*.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
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


SEED = "train.seed"  # the column that tells a cell's replicates apart
REPRODUCED, NOT_REPRODUCED, WITHIN_NOISE, NOT_EVALUABLE = (
    "reproduced",
    "not reproduced",
    "within noise",
    "not evaluable",
)
VERDICTS = (REPRODUCED, NOT_REPRODUCED, WITHIN_NOISE, NOT_EVALUABLE)
RULE = "n >= 2 seeds: the mean paired margin beyond 2 standard errors; n = 1: its sign"
_STATUS = {1: REPRODUCED, -1: NOT_REPRODUCED, 0: WITHIN_NOISE}


@dataclass
class Verdict:
    status: str  # reproduced | not reproduced | within noise | not evaluable
    detail: str  # the numbers behind it
    seeds: int = 0  # the replicates it was judged on (0: not judged)


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
    metrics, ``train.seed`` for replicates), after its preconditions ``requires``."""
    checks = [*requires, check]
    seeds = _complete_seeds(runs, cell_keys, [sel for c in checks for sel in parse(c)[1]])
    frames = [runs[_seeds(runs) == seed] for seed in seeds]
    means = _means(frames, cell_keys)
    held = []
    for precondition in requires:
        if precondition == check:  # a claim that the models learned is no precondition of itself
            continue
        verdict = _judge(precondition, means, [means], cell_keys, len(seeds))  # on the seed means
        shown = _judge(precondition, means, frames, cell_keys, len(seeds)).detail if len(frames) > 1 else ""
        if verdict.status != REPRODUCED:
            why = "does not hold" if verdict.status == NOT_REPRODUCED else "cannot be checked"
            return Verdict(
                NOT_EVALUABLE, f"precondition `{precondition}` {why} on the seed means: {shown or verdict.detail}"
            )
        if shown:  # the spread behind a threshold the seed means passed
            held.append(f"precondition `{precondition}` holds on the seed means: {shown}")
    verdict = _judge(check, means, frames, cell_keys, len(seeds))
    if held:
        verdict.detail = f"{verdict.detail} ({'; '.join(held)})"
    return verdict


def _seeds(runs: pd.DataFrame) -> pd.Series:
    return runs[SEED] if SEED in runs else pd.Series(0, index=runs.index)


def _complete_seeds(runs: pd.DataFrame, cell_keys: list[str], selections: list[tuple[str, dict]]) -> list:
    """The seeds whose runs complete every selection (finished, the metric stored, every cell there, and
    for a timing metric every run alone); when none does, the first seed (its selections then say what is
    missing)."""
    seeds = list(dict.fromkeys(_seeds(runs)))
    complete = []
    for seed in seeds:
        frame = runs[_seeds(runs) == seed]
        ok = True
        for metric, filters in selections:
            try:
                rows, every = _matching(frame, cell_keys, filters), _matching(runs, cell_keys, filters)
            except NotEvaluable:
                ok = False
                break
            cells = lambda r: len(r[[k for k in cell_keys if k in r]].astype(str).drop_duplicates()) if cell_keys else 1  # noqa: E731
            if (
                rows.empty
                or (rows["status"] != "finished").any()
                or metric not in rows
                or rows[metric].isna().any()
                or cells(rows) != cells(every)
            ):
                ok = False
                break
            if metric in TIMED:  # a seed whose timed runs did not run alone has no timing to judge
                try:
                    _check_alone(rows, metric, filters)
                except NotEvaluable:
                    ok = False
                    break
        if ok:
            complete.append(seed)
    return complete or seeds[:1]


def _means(frames: list[pd.DataFrame], cell_keys: list[str]) -> pd.DataFrame:
    """One row per cell: the numeric columns averaged over the frames' seeds (the first's order)."""
    if len(frames) == 1:
        return frames[0]
    both = pd.concat(frames)
    keys = [k for k in cell_keys if k in both]
    numeric = [c for c in both.select_dtypes("number").columns if c not in keys and c != SEED]
    alone = (
        both["ran_alone"].astype(object).where(both["ran_alone"].notna(), False).astype(bool)
        if "ran_alone" in both
        else None
    )
    if not keys:
        extra = {"ran_alone": bool(alone.all())} if alone is not None else {}
        return pd.DataFrame([{"status": "finished", **both[numeric].mean().to_dict(), **extra}])
    labels = both[keys].astype(str)  # a cell's value may be a dict (data={...}): grouped by its text,
    by = [labels[k].rename(f"_{i}") for i, k in enumerate(keys)]  # but each cell keeps its own value
    cells = both[keys].groupby(by, sort=False, dropna=False).first()
    grouped = both[numeric].groupby(by, sort=False, dropna=False).mean()
    # a cell ran alone if every seed of it did
    parts = [cells, grouped] + ([alone.groupby(by, sort=False, dropna=False).all()] if alone is not None else [])
    return pd.concat(parts, axis=1).reset_index(drop=True).assign(status="finished")


def _judge(check: str, means: pd.DataFrame, frames: list[pd.DataFrame], cell_keys: list[str], n: int) -> Verdict:
    """The verdict of ``check`` on the seed means ``means``, its noise from the per-seed ``frames``."""
    tree, selections = parse(check)
    try:
        mean = {f"_s{i}": _select(means, cell_keys, m, f) for i, (m, f) in enumerate(selections)}
        per_seed = [{f"_s{i}": _select(fr, cell_keys, m, f) for i, (m, f) in enumerate(selections)} for fr in frames]
        margins: list[str] = []
        status = _status(tree.body, mean, per_seed, margins)
    except NotEvaluable as why:
        return Verdict(NOT_EVALUABLE, str(why))
    except ZeroDivisionError:
        return Verdict(NOT_EVALUABLE, "a stored value divides by zero")
    shown = "; ".join(  # a selection the check names twice is shown once
        dict.fromkeys(
            f"{_shown(m, f)} = {_spread(mean[f'_s{i}'], [p[f'_s{i}'] for p in per_seed])}"
            for i, (m, f) in enumerate(selections)
        )
    )
    if len(frames) > 1 and margins:
        shown += f"; margin {'; '.join(margins)}"  # mean ± sd over seeds; margins with their standard error
    shown += "; judged on one seed" if n == 1 else f"; n = {n} seeds, paired"
    if isinstance(status, pd.Series) and len(status) > 1:  # a check cell by cell: the cells it does not pass
        for word, level in (("fails at", -1), ("within noise at", 0)):
            cells = [str(k) for k, s in status.items() if s == level]
            shown += f"; {word} {', '.join(cells)}" if cells else ""
    overall = int(_as_series(status).min())
    return Verdict(_STATUS[overall], shown, n)


def _status(node: ast.AST, mean: dict[str, Any], per_seed: list[dict[str, Any]], margins: list[str]) -> Any:
    """+1 (holds beyond the noise), -1 (fails beyond it) or 0 (within it) of a boolean node, per cell
    where it compares cells; ``margins`` collects each comparison's margin and standard error."""
    if isinstance(node, ast.BoolOp):
        parts = [_status(v, mean, per_seed, margins) for v in node.values]
        combine = np.minimum if isinstance(node.op, ast.And) else np.maximum
        out = parts[0]
        for part in parts[1:]:
            out = combine(out, part)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return -_status(node.operand, mean, per_seed, margins)
    if isinstance(node, ast.Call) and node.func.id in ("all", "any") and len(node.args) == 1:
        inner = _as_series(_status(node.args[0], mean, per_seed, margins))
        return int(inner.min() if node.func.id == "all" else inner.max())
    if isinstance(node, ast.Compare):
        out: Any = 1
        left = (_eval(node.left, mean), [_eval(node.left, p) for p in per_seed])
        for op, right_node in zip(node.ops, node.comparators):
            right = (_eval(right_node, mean), [_eval(right_node, p) for p in per_seed])
            out = np.minimum(out, _compared(type(op), left, right, margins))
            left = right
        return out
    value = _eval(node, mean)  # a bare number: its truth on the seed means
    return _as_bool(value).astype(int) * 2 - 1 if isinstance(value, pd.Series) else (1 if value else -1)


def _compared(op: type, left: tuple[Any, list], right: tuple[Any, list], margins: list[str]) -> Any:
    """One comparison's status from its margin on the means and the per-seed margins."""
    (lm, ls), (rm, rs) = left, right
    lm, rm = _aligned(lm, rm)
    if op in (ast.Eq, ast.NotEq):
        holds = _COMPARE[op](lm, rm)
        return holds.astype(int) * 2 - 1 if isinstance(holds, pd.Series) else (1 if holds else -1)
    sign = 1 if op in (ast.Lt, ast.LtE) else -1
    margin = sign * (rm - lm)
    per_seed = [sign * (r - lv) for lv, r in (_aligned(a, b) for a, b in zip(ls, rs))]
    strict = op in (ast.Lt, ast.Gt)
    if isinstance(margin, pd.Series):
        table = pd.concat([_as_series(p).reindex(margin.index) for p in per_seed], axis=1)
        se = table.std(axis=1, ddof=1) / math.sqrt(table.shape[1]) if table.shape[1] > 1 else margin * 0
        out = pd.Series([_beyond(m, e, strict) for m, e in zip(margin, se)], index=margin.index)
        margins.append(
            "{" + ", ".join(f"{k}: {m:+.4g} (SE {e:.2g})" for k, m, e in zip(margin.index, margin, se)) + "}"
        )
        return out
    se = float(np.std([float(p) for p in per_seed], ddof=1)) / math.sqrt(len(per_seed)) if len(per_seed) > 1 else 0.0
    margins.append(f"{float(margin):+.4g} (SE {se:.2g})")
    return _beyond(float(margin), se, strict)


def _beyond(margin: float, se: float, strict: bool) -> int:
    """+1, -1 or 0: the margin beyond two standard errors either way, or within them (sign when se = 0)."""
    if se == 0 or math.isnan(se):
        return 1 if (margin > 0 if strict else margin >= 0) else -1
    return 1 if margin > 2 * se else -1 if margin < -2 * se else 0


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


def filter_keys(check: str, cell_keys: list[str]) -> list[tuple[str, str, str | None]]:
    """``(key, value, grid key)`` for every filter of ``check``; the grid key is None unless the key names
    exactly one of ``cell_keys`` (what ``repro validate`` refuses)."""
    out = []
    for _, filters in parse(check)[1]:
        for key, value in filters.items():
            matches = [c for c in cell_keys if c == key or c.endswith("." + key)]
            out.append((key, value, matches[0] if len(matches) == 1 else None))
    return out


def _matching(runs: pd.DataFrame, cell_keys: list[str], filters: dict[str, str]) -> pd.DataFrame:
    """The rows whose cell matches every filter (a key names one grid key, or its dotted suffix)."""
    rows = runs
    for key, value in filters.items():
        matches = [c for c in cell_keys if c == key or c.endswith("." + key)]
        if len(matches) != 1:
            raise NotEvaluable(f"filter key {key!r} matches {len(matches)} grid keys of {cell_keys}")
        rows = rows[rows[matches[0]].astype(str) == value]
    return rows


def _select(runs: pd.DataFrame, cell_keys: list[str], metric: str, filters: dict[str, str]) -> Any:
    rows = _matching(runs, cell_keys, filters)
    used = {c for key in filters for c in cell_keys if c == key or c.endswith("." + key)}
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
        others = shared["others_cores_max"] if "others_cores_max" in shared else pd.Series(dtype=float)
        loads = shared["load_average_max"] if "load_average_max" in shared else pd.Series(dtype=float)
        cpus = shared["cpus"].iloc[0] if "cpus" in shared else "?"
        measured = (
            f"other processes kept up to {others.max():.2f} of {cpus} cores busy"
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
