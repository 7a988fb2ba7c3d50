"""Claims: the grammar of a paper's findings written as checks over a manifest's runs (no pandas here:
judging them is the report stage's, :mod:`repro.report.verdicts`).

A check is an arithmetic/boolean expression over *selections*::

    avg_span[span.kind=adaptive, span.limit=4096] < 0.25 * 4096
    valid_bits[span.kind=adaptive] <= valid_bits[span.kind=fixed]

``metric[key=value, ...]`` picks the runs whose grid cell matches every filter (a key matches a cell key
equal to it or ending in ``.key``) and yields their ``metric`` (a ``summary.json`` key, :mod:`metrics`, or
a dotted spec key such as ``model.span.ramp``), indexed by the grid keys the filters left free, in grid
order. Two selections compare cell by cell on that index, so the second line holds when adaptive beats
fixed at every span limit; a cell with two runs is an error, never paired by position. A selection of one
run is a number. Functions: mean, min, max, abs, all, any, and first/last (the value at the first/last
cell in grid order, e.g. the smallest and largest S). ``abs(x) < k`` is a *band* (judged two-sided).

Two words expand into checks:

- ``learned[key=value, ...]``: the suite's one definition of "the model learned the data": each selected
  run's valid bits below :data:`LEARNED_FRACTION` times the unigram bits of its data
  (``learned_test[...]``: its test bits, where only the test split is scored). A claim made only of these
  is a *sanity* check ("trained"), reported apart from the paper's findings.
- ``moved[key=value, ...]``: the adaptive span's mechanism moved: the longest head's z (not z + R) reached
  :data:`MOVED_FRACTION` of R, *and* the average effective span grew past its initial value R by
  :data:`AVERAGE_MOVED_FRACTION` of R (one head that moved while the rest stayed at R is no moved
  mechanism). A precondition holds only when it holds on every seed the claim pairs, never on a seed
  mean (repro.report.verdicts). A claim on a metric the span mechanism sets (:data:`SPAN_METRICS`) gets
  this precondition for each of its selections without its author writing it (:func:`mechanism_requires`).
- ``used[CLASS, key=value, ...]`` (synthetic corpora, docs/probes.md): the selected runs used the long-range
  source of dependency class CLASS: its valid bits (``valid_bits.CLASS``) below the bits of a model blind
  at its distance by at least :data:`USED_FRACTION` of the gap between that and the class's floor. A
  claim on bits that a short span wins on the filler cannot hold while nothing long-range was learned.

A claim on a span metric that would hold at the spans' initial value too (z = 0: :data:`INITIAL`) says
nothing about the penalty: the report judges it *not evaluable* (the initial-span control) unless it
compares against a lambda = 0 control, whose spans start alike.

*Cost checks*: claims made only of :data:`COST_METRICS` (FLOPs, parameters, memory, keys per query) are
computed from the model's shape and its spans rather than sampled; the report counts them apart from the
findings and leaves them out of the multiplicity correction.

A claim may carry preconditions (``requires``): checks in the same language that must hold for the claim
to say anything (the spans moved, the baseline uses its context, the model learned the data).
"""

from __future__ import annotations

import ast
import re

from repro.config import keys, metrics
from repro.errors import UserError

LEARNED_FRACTION = 0.8
LEARNED = {"learned": "valid_bits", "learned_test": "test_bits"}
MOVED_FRACTION = 1.0  # of R: the longest head's z reached R (z starts at 0, so z + R starts at R)
AVERAGE_MOVED_FRACTION = 0.25  # of R: the average effective span grew past R by a quarter of R
# the span metrics whose value at z = 0 is known: the average effective span min(S, R), the mean z's 0
INITIAL = ("avg_span", "span_lower_half", "span_upper_half")
COST_METRICS = ("flops_per_token", "params", "peak_memory_bytes", "attn_keys_per_query")
USED_FRACTION = 0.25  # of blind - floor: a class counts as used once a quarter of its long-range bits is gained
SPAN_METRICS = ("avg_span", "flops_per_token", "span_lower_half", "span_upper_half", "dynamic_span_mean")
_WORDS = re.compile(r"\b(learned_test|learned|moved|used)\[([^\[\]]*)\]")
_SELECTION = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)\[([^\[\]]*)\]")
FUNCTIONS = ("mean", "min", "max", "abs", "all", "any", "first", "last")
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_COMPARISONS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
TIMED = ("seconds_per_step", "train_seconds", "model_flops_per_second", "mfu")

Selection = tuple[str, dict[str, str]]


class ClaimError(UserError):
    pass


def _expand_word(match: re.Match) -> str:
    word, f = match.group(1), match.group(2)
    if word == "used":
        group, _, f = f.partition(",")
        if not re.fullmatch(r"[a-z][a-z0-9]*", group.strip()):
            raise ClaimError(f"used[{match.group(2)}]: expected a dependency class first (used[long, key=value])")
        bits, blind, floor = (f"{m}.{group.strip()}[{f}]" for m in ("valid_bits", "blind_bits", "floor_bits"))
        return f"({bits} < {blind} - {USED_FRACTION} * ({blind} - {floor}))"
    if word == "moved":
        return (
            f"(span_max[{f}] >= {MOVED_FRACTION} * model.span.ramp[{f}] and "
            f"avg_span[{f}] >= {1 + AVERAGE_MOVED_FRACTION} * model.span.ramp[{f}])"
        )
    return f"({LEARNED[word]}[{f}] < {LEARNED_FRACTION} * unigram_bits[{f}])"


def parse(check: str) -> tuple[ast.Expression, list[Selection]]:
    """Parse a check into an AST whose names ``_s0, _s1, ...`` stand for its selections."""
    selections: list[Selection] = []

    def replace(match: re.Match) -> str:
        filters = {}
        for part in filter(None, (p.strip() for p in match.group(2).split(","))):
            key, eq, value = part.partition("=")
            if not eq or not key.strip() or not value.strip():
                raise ClaimError(f"claim {check!r}: filter {part!r} is not key=value")
            filters[key.strip()] = value.strip()
        selections.append((match.group(1), filters))
        return f"_s{len(selections) - 1}"

    try:
        tree = ast.parse(_SELECTION.sub(replace, _WORDS.sub(_expand_word, check)), mode="eval")
    except SyntaxError as err:
        raise ClaimError(f"claim {check!r} does not parse: {err.msg}") from None
    allowed = (
        *(ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Call, ast.Name, ast.Constant),
        *(ast.Load, ast.And, ast.Or, ast.Not, ast.USub, *_ARITHMETIC, *_COMPARISONS),
    )
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise ClaimError(f"claim {check!r}: {type(node).__name__} is not allowed in a check")
        if isinstance(node, ast.Name) and not (node.id.startswith("_s") or node.id in FUNCTIONS):
            raise ClaimError(f"claim {check!r}: unknown name {node.id!r} (write metric[key=value])")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
            raise ClaimError(f"claim {check!r}: only {', '.join(FUNCTIONS)} may be called")
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


def is_sanity(check: str) -> bool:
    """A check made only of ``learned[...]`` words: it says the model trained, not what the paper found."""
    rest = _WORDS.sub("", check)
    return bool(_WORDS.search(check)) and not re.search(r"[A-Za-z_]", re.sub(r"\b(and|or|all|any)\b", "", rest))


def is_cost(check: str) -> bool:
    """A check made only of :data:`COST_METRICS` (and constants): a cost check, counted apart."""
    return all(metric in COST_METRICS for metric, _ in parse(check)[1])


def shown(metric: str, filters: dict[str, str]) -> str:
    """A selection as the check writes it: ``valid_bits[kind=adaptive]``."""
    return f"{metric}[{', '.join(f'{k}={v}' for k, v in filters.items())}]"


def mechanism_requires(check: str, family: str | None) -> list[tuple[str, dict[str, str]]]:
    """The preconditions a check gets by itself, each with the filters it selects by: ``moved[...]`` for
    every selection of a span-set metric (its spans, or FLOPs that follow them) of a family with learned
    spans, so a claim cannot hold only because no span left z = 0 (z + R then measures R)."""
    if family not in ("adaptive_span", "frontier"):
        return []
    out: dict[str, dict[str, str]] = {}
    for metric, filters in parse(check)[1]:
        if metric in SPAN_METRICS:
            out.setdefault(shown("moved", filters), filters)
    return list(out.items())


def filter_keys(check: str, cell_keys: list[str]) -> list[tuple[str, str, str | None]]:
    """``(key, value, grid key)`` for every filter of ``check``; the grid key is None unless the key names
    exactly one of ``cell_keys`` (what ``repro validate`` refuses)."""
    out = []
    for _, filters in parse(check)[1]:
        for key, value in filters.items():
            matches = keys.matching(key, cell_keys)
            out.append((key, value, matches[0] if len(matches) == 1 else None))
    return out


def unknown_metrics(check: str, family: str | None) -> list[tuple[str, list[str]]]:
    """``(metric, close names)`` for every selection whose metric no run of ``family`` stores."""
    return [
        (m, metrics.close(m, family))
        for m, _ in parse(check)[1]
        if not metrics.known(m, family) and not m.startswith(("data.", "model.", "train.", "eval."))
    ]


def by_construction(check: str, cell_keys: list[str]) -> list[str]:
    """Warnings: comparisons that can hold by construction, whatever was learned (a metric that counts a
    grid key's value, compared across cells that differ in that key)."""
    tree, selections = parse(check)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        used = [
            [selections[int(n.id[2:])] for n in ast.walk(side) if isinstance(n, ast.Name) and n.id.startswith("_s")]
            for side in sides
        ]
        for metric, (counted, why) in metrics.COUNTS.items():
            for key in counted:
                values = {
                    next((v for k, v in f.items() if key in keys.matching(k, cell_keys) or k == key), None)
                    for side in used
                    for m, f in side
                    if m == metric
                }
                if len(values) > 1 and None not in values:
                    out.append(
                        f"{metric} counts {key} ({why}): comparing it across "
                        f"{key} = {', '.join(sorted(values))} can hold by construction"
                    )
    return list(dict.fromkeys(out))
