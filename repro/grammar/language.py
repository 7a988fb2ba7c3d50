"""The claim language: a paper's findings written as checks over a manifest's runs, parsed once here
(judging them is :mod:`repro.claims.judge`'s; no pandas here).

A check is an arithmetic/boolean expression over *selections*::

    avg_span[span.kind=adaptive, span.limit=4096] < 0.25 * 4096
    valid_bits[span.kind=adaptive] <= valid_bits[span.kind=fixed]

``metric[key=value, ...]`` picks the runs whose grid cell matches every filter (a key matches a cell key
equal to it or ending in ``.key``) and yields their ``metric`` (a ``summary.json`` key, a derived metric of
:mod:`repro.report.derived`, or a dotted spec key such as ``model.span.ramp``), indexed by the grid keys
the filters left free, in grid order. Two selections compare cell by cell on that index, so the second line
holds when adaptive beats fixed at every span limit; a cell with two runs is an error, never paired by
position. A selection of one run is a number. Functions: mean, min, max, abs, all, any, first/last (the
value at the first/last cell in grid order), and ``best(x, y, ...)``: the argument whose seed mean is lowest
(the best baseline the manifest trains, chosen once on the means and then paired seed by seed, never a
per-seed minimum, which would pick each seed's luckiest arm), and ``nonincreasing(x)``: each cell of ``x``
after the first is ``<=`` the cell before it, a cell-wise comparison (the premise "far context helps": a
fixed span's bits do not rise along S). ``abs(x) < k`` is a *band* (judged by two one-sided tests). A premise
or control may name ``sesoi``: the claim's smallest effect of interest (the dense-baseline premise: dense
not worse than the sparse arm it bounds by more than it, ``test_bits[pattern=dense] <= test_bits[pattern=fixed] + sesoi``).
The comparison operators and how each is judged are one table, :data:`repro.grammar.operators.OPERATORS`.

Words that expand into checks:

- ``learned[key=value, ...]``: the suite's one definition of "the model learned the data": each selected
  run's valid bits below :data:`LEARNED_FRACTION` times the unigram bits of its data
  (``learned_test[...]``: its test bits, where only the test split is scored).
- ``used[CLASS, key=value, ...]`` (synthetic corpora, docs/probes.md): the selected runs used the long-range
  source of dependency class CLASS: its valid bits (``valid_bits.CLASS``) below the bits of a model blind
  at its distance by at least :data:`USED_FRACTION` of the gap between that and the class's floor. A
  claim on bits that a short span wins on the filler cannot hold while nothing long-range was learned.

A claim has a *kind* (:func:`kind`): a **sanity** check (made only of ``learned`` words: the model
trained), a **cost** check (made only of :data:`COST_METRICS`, computed from the model's shape; or an
``or`` one of whose parts is a cost: it can hold by its cost alone), or a **finding**, the papers' claims
that REPORT.md adjusts for multiplicity. A claim may carry *requirements*, checks in the same language:
``requires`` (gates: each must hold on every seed) and ``controls`` (comparisons judged like the claim,
which a reproduced claim must also pass: the fixed S = R window beside adaptive span, the lambda = 0
arm beside a span claim).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property

from repro.errors import UserError
from repro.grammar.operators import OPERATORS

LEARNED_FRACTION = 0.8
LEARNED = {"learned": "valid_bits", "learned_test": "test_bits"}
COST_METRICS = ("flops_per_token", "params", "peak_memory_bytes", "attn_keys_per_query")
USED_FRACTION = 0.25  # of blind - floor: a class counts as used once a quarter of its long-range bits is gained
_WORDS = re.compile(r"\b(learned_test|learned|used)\[([^\[\]]*)\]")
_SELECTION = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)\[([^\[\]]*)\]")
FUNCTIONS = ("mean", "min", "max", "abs", "all", "any", "first", "last", "best", "nonincreasing")
SESOI = "sesoi"  # a name a premise may use: the claim's smallest effect of interest (repro.claims.power.bound)
STEPS = ("_later", "_earlier")  # what nonincreasing(x) compares: each cell of x after the first, the one before it
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_COMPARISONS = tuple(OPERATORS)  # a check may compare with exactly the operators the judge has a rule for
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
        if isinstance(node, ast.Name) and not (node.id.startswith("_s") or node.id in (*FUNCTIONS, SESOI)):
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
    return _stepped(tree), selections


def _stepped(tree: ast.Expression) -> ast.Expression:
    """``nonincreasing(x)`` written as the cell-wise comparison it is: each cell of ``x`` after the first
    ``<=`` the cell before it (``_later(x) <= _earlier(x)``), judged like any comparison of cells."""

    class Steps(ast.NodeTransformer):
        def visit_Call(self, call: ast.Call) -> ast.AST:
            self.generic_visit(call)
            if call.func.id != "nonincreasing":
                return call
            if len(call.args) != 1:
                raise ClaimError("nonincreasing(x) takes one selection")
            later, earlier = (ast.Call(ast.Name(f, ast.Load()), call.args, []) for f in STEPS)
            return ast.Compare(later, [ast.LtE()], [earlier])

    return ast.fix_missing_locations(Steps().visit(tree))


@dataclass(eq=False)
class Check:
    """A check parsed once (:func:`compiled`): its text, its tree and its selections, handed on whole to
    whatever judges it, so that no stage parses the same check again."""

    text: str
    tree: ast.Expression
    selections: list[Selection]

    @cached_property
    def kind(self) -> str:
        return kind(self)


def compiled(check: str | Check) -> Check:
    """``check`` parsed (:func:`parse`), or as it is where it already was."""
    return check if isinstance(check, Check) else Check(check, *parse(check))


def written(check: str | Check) -> str:
    """A check as it is written."""
    return check.text if isinstance(check, Check) else check


def is_sanity(check: str | Check) -> bool:
    """A check made only of ``learned[...]`` words: it says the model trained, not what the paper found."""
    check = written(check)
    rest = _WORDS.sub("", check)
    return bool(_WORDS.search(check)) and not re.search(r"[A-Za-z_]", re.sub(r"\b(and|or|all|any)\b", "", rest))


def is_cost(check: str | Check) -> bool:
    """A cost check: made only of :data:`COST_METRICS` (and constants), or an ``or`` one of whose parts is
    (it can hold by its cost alone, whatever the bits say)."""
    parsed = compiled(check)
    tree, selections = parsed.tree, parsed.selections

    def costly(node: ast.AST) -> bool:
        names = [int(n.id[2:]) for n in ast.walk(node) if isinstance(n, ast.Name) and n.id.startswith("_s")]
        return bool(names) and all(selections[i][0] in COST_METRICS for i in names)

    body = tree.body
    return costly(body) or (
        isinstance(body, ast.BoolOp) and isinstance(body.op, ast.Or) and any(map(costly, body.values))
    )


SPLITS = ("test", "valid")  # a manifest's declared split (the first: the default, as the papers report)


def split_of(metric: str) -> str | None:
    """The split a metric scores (``test_bits.long``: test), None for one that scores none."""
    return next((s for s in SPLITS if metric.startswith(f"{s}_bits")), None)


def other_split(check: str | Check, split: str) -> str | None:
    """The first selection of ``check`` that scores a split other than ``split`` (as written), None when
    there is none or the check is a sanity check (that the model learned: valid serves it as it serves
    selection and curves)."""
    parsed = compiled(check)
    if is_sanity(parsed):
        return None
    return next((shown(m, f) for m, f in parsed.selections if split_of(m) not in (None, split)), None)


FINDING, SANITY, COST = "finding", "sanity", "cost"


def kind(check: str | Check) -> str:
    """:data:`SANITY`, :data:`COST` or :data:`FINDING` (the module docstring)."""
    return SANITY if is_sanity(check) else COST if is_cost(check) else FINDING


def shown(metric: str, filters: dict[str, str]) -> str:
    """A selection as the check writes it: ``valid_bits[kind=adaptive]``."""
    return f"{metric}[{', '.join(f'{k}={v}' for k, v in filters.items())}]"
