"""A manifest's document (its file, includes merged) as pydantic models: each top-level key's type and
what it must hold in one line, and the rules between keys (a grid key is set in ``base``, a claim names
metrics its family stores, the headline names a claim) as model validators. :func:`repro.config.fields.build`
turns the first fault into the one line that names the key, the value and what was expected;
:mod:`repro.config.manifest` makes the Manifest of a valid document (docs/manifests.md: every key).
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, Field, model_validator

from repro.config import claim_checks, keys, metrics
from repro.config.families import ATTENTIONS, FAMILIES
from repro.config.fields import Section, expect, refuse
from repro.config.keys import show
from repro.config.spec import SECTIONS, DataSpec, EvalSpec, TrainSpec
from repro.grammar import language as claims

VARIANT = "variant"  # the grid key whose values are named override mappings
SCALES = ("tiny", "cpu", "small", "paper")  # in order of size; a manifest may add its own


def scale_names(scales: dict[str, Any]) -> list[str]:
    """A manifest's scales in order: the known ones by size (``paper`` always), then its own."""
    return [s for s in SCALES if s == "paper" or s in scales] + [s for s in scales if s not in SCALES]


def scale_grid(grid: dict[str, list[Any]], scales: dict[str, Any], scale: str) -> dict[str, list[Any]]:
    """The grid at ``scale``: the manifest's, with the lists the scale's own ``grid`` replaces or adds."""
    return {**grid, **(scales.get(scale, {}).get("grid") or {})}


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _count(value: Any, least: int = 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _seeds(value: Any) -> bool:
    """A number of seeds (one look), or looks (repro.claims.sequential): ``{first: 3, max: 8}`` (first >= 2,
    max > first) or ``{looks: [3, 5, 8]}`` (at least two, increasing, the first >= 2)."""
    if isinstance(value, dict) and set(value) == {"first", "max"}:
        return _count(value["first"], 2) and _count(value["max"]) and value["max"] > value["first"]
    if isinstance(value, dict) and set(value) == {"looks"}:
        looks = value["looks"]
        return (
            isinstance(looks, list)
            and len(looks) >= 2
            and all(_count(n, 2) for n in looks)
            and all(a < b for a, b in zip(looks, looks[1:]))
        )
    return _count(value)


def _seeds_message(value: Any) -> str:
    return (
        f"expected a positive number of seeds per grid cell, got {show(value)} (or looks: {{first: N, max: M}} "
        "with 2 <= N < M, or {looks: [N, ...]}, increasing)"
    )


Name = Annotated[str, expect(lambda v: isinstance(v, str), lambda v: f"expected a string, got {v!r}")]
Str = Annotated[str, BeforeValidator(str)]  # a claim's text and check: anything, as text
Text = Annotated[str, BeforeValidator(lambda v: str(v or ""))]  # description, notes: anything, as text (null: none)
Strings = Annotated[list[str], expect(_strings, "expected a list of strings", empty=[])]
Mapping = Annotated[dict, expect(lambda v: isinstance(v, dict), "expected a mapping", empty={})]
Seeds = Annotated[int | dict, expect(_seeds, _seeds_message)]
Split = Annotated[
    str,
    expect(
        lambda v: v in claims.SPLITS, f"expected one of {', '.join(claims.SPLITS)} (the split claims are judged on)"
    ),
]
Scale = Annotated[dict, expect(lambda v: isinstance(v, dict), "expected a mapping of overrides")]


class ClaimDocument(Section):
    """One of ``claims:``: a finding written as a check (:mod:`repro.grammar.language`)."""

    shape: ClassVar[str] = "expected a mapping with id, text, check (and scales, requires, controls, sesoi)"

    id: Any = None  # default: the claim's index
    text: Str = ""
    check: Str
    scales: Annotated[
        list[str] | None, expect(lambda v: v is None or _strings(v), "expected a list of scale names")
    ] = None  # judged only at these scales (None: every scale)
    requires: Strings = Field(default_factory=list)  # preconditions, after the manifest's
    controls: Strings = Field(default_factory=list)  # comparisons a reproduced claim must also pass
    sesoi: Annotated[
        float | None,
        expect(
            lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0),
            "expected a positive number",
        ),
    ] = None  # the smallest effect of interest (None: the metric's default, repro.claims.power)


class ReferenceRun(Section):
    """One of ``reference.runs``: the paper's values of the grid cells its ``match`` picks."""

    model_config = ConfigDict(extra="allow")  # <metric>: the paper's value

    match: dict = Field(default_factory=dict)  # grid key (or a dotted suffix) -> value
    label: str = ""
    prior: bool = False

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("match", {}), dict):
            raise refuse("expected a mapping with a `match` mapping")
        return data

    @model_validator(mode="after")
    def _values(self) -> ReferenceRun:
        for key, value in (self.model_extra or {}).items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise refuse(f"expected a number (the paper's value) or null, got {show(value)}", key)
        return self


class Reference(Section):
    """``reference:``, the paper's numbers: ``runs`` here, the other keys the renderers' (checked with them:
    :func:`repro.config.renderer_names.check`)."""

    model_config = ConfigDict(extra="allow")

    runs: Annotated[
        list[ReferenceRun],
        expect(lambda v: isinstance(v, list), "expected a list of {match, label, prior, <metric>: value} entries"),
    ] = Field(default_factory=list)


class Document(Section):
    """A manifest file's top-level keys (``include:`` is merged away before: repro.config.manifest.read)."""

    name: Name
    title: Name
    paper: Name
    family: Annotated[
        str | None, expect(lambda v: v is None or (isinstance(v, str) and v != ""), "expected a family name")
    ] = None  # the family REPORT.md adjusts its findings in (None: its paper's)
    base: Annotated[Any, expect(lambda v: isinstance(v or {}, dict), "expected a mapping")] = None
    grid: Mapping = Field(default_factory=dict)
    scales: Annotated[dict[Any, Scale], expect(lambda v: isinstance(v, dict), "expected a mapping", empty={})] = Field(
        default_factory=dict
    )
    reference: Annotated[Reference, expect(lambda v: isinstance(v, dict), "expected a mapping", empty={})] = Field(
        default_factory=Reference
    )
    set: Mapping = Field(default_factory=dict)
    sweep: Mapping = Field(default_factory=dict)
    seeds: Seeds = 1
    split: Split = claims.SPLITS[0]  # the one split every claim is judged on (test, as the papers report)
    renders: Strings = Field(default_factory=list)
    analysis: Strings = Field(default_factory=list)  # absolute paths (read resolves them)
    requires: Strings = Field(default_factory=list)
    claims: Annotated[list[ClaimDocument], expect(lambda v: isinstance(v, list), "expected a list", empty=[])] = Field(
        default_factory=list
    )
    parts: Strings = Field(default_factory=list)
    headline: Any = None
    description: Text = ""
    notes: Text = ""

    @model_validator(mode="before")
    @classmethod
    def _each(cls, data: Any) -> Any:
        """Every ``variant: {each: KEY, with: ...}`` axis (of the grid and of each scale's) as its variants."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("grid"), dict):
            data["grid"] = each_variant(data["grid"], "grid")
        if isinstance(data.get("scales"), dict):
            data["scales"] = {
                name: {**over, "grid": each_variant(over["grid"], f"scales.{name}.grid")}
                if isinstance(over, dict) and isinstance(over.get("grid"), dict)
                else over
                for name, over in data["scales"].items()
            }
        return data

    @model_validator(mode="after")
    def _rules(self) -> Document:
        for name, over in self.scales.items():
            if not _seeds(over.get("seeds", 1)):
                raise refuse(_seeds_message(over["seeds"]), f"scales.{name}.seeds")
            _check_grid(f"scales.{name}.grid", over.get("grid") or {}, self.base or {}, self.grid)
        if "base" not in self.model_fields_set and (self.grid or self.scales or self.set or self.sweep):
            raise refuse("required when the manifest has a grid, scales, set or sweep", "base")
        _check_grid("grid", self.grid, self.base or {}, {})
        _check_overrides(self.set, self.sweep)
        family = _family(self.base)
        for j, check in enumerate(self.requires):
            _check_claim(f"requires[{j}]", check, family)
        for i, claim in enumerate(self.claims):
            for j, check in enumerate(claim.requires):
                _check_claim(f"claims[{i}].requires[{j}]", check, family)
            for j, check in enumerate(claim.controls):
                _check_claim(f"claims[{i}].controls[{j}]", check, family)
            _check_claim(f"claims[{i}]", claim.check, family)
        ids = self.claim_ids()
        if self.headline is not None and str(self.headline) not in ids:
            raise refuse(f"{self.headline!r} names no claim; claims: {', '.join(ids) or 'none'}", "headline")
        self._check_reference_runs()
        self._check_claim_cells()
        for where, check in [(f"requires[{j}]", c) for j, c in enumerate(self.requires)] + [
            (f"claims[{i}]{part}", c)
            for i, claim in enumerate(self.claims)
            for part, c in [
                *((f".requires[{j}]", r) for j, r in enumerate(claim.requires)),
                *((f".controls[{j}]", r) for j, r in enumerate(claim.controls)),
                ("", claim.check),
            ]
        ]:
            _check_split(where, check, self.split)
        return self

    def _check_reference_runs(self) -> None:
        """Every ``match`` key of ``reference.runs`` names a grid key of some scale."""
        grid_keys = {k for s in scale_names(self.scales) for k in scale_grid(self.grid, self.scales, s)}
        grid_keys |= set(self.sweep)
        for i, run in enumerate(self.reference.runs):
            for key in run.match:
                if not keys.matching(key, grid_keys):
                    raise refuse(
                        f"names no grid key; grid keys: {', '.join(sorted(grid_keys)) or 'none'}",
                        f"reference.runs[{i}].match.{key}",
                    )

    def _check_claim_cells(self) -> None:
        """Every filter of a claim (and of its preconditions) names one grid key, with a value of that key's
        grid, at every scale the claim is judged at: a typo is refused here, not judged 'not evaluable'."""
        for i, (claim, id) in enumerate(zip(self.claims, self.claim_ids())):
            scales = [s for s in scale_names(self.scales) if claim.scales is None or s in claim.scales]
            for check in [*self.requires, *claim.requires, *claim.controls, claim.check]:
                for scale in scales:
                    grid = scale_grid(self.grid, self.scales, scale)
                    for key, value, full in claim_checks.filter_keys(check, list(grid)):
                        where = f"claims[{i}] ({id}), scale {scale}"
                        if full is None:
                            raise refuse(
                                f"filter {key}={value} names no single grid key; grid keys: {', '.join(grid) or 'none'}",
                                where,
                            )
                        values = [v["name"] if full == VARIANT else v for v in grid[full]]
                        if value not in {str(v) for v in values}:
                            raise refuse(
                                f"{key}={value} is not in the grid; {full} takes: {', '.join(map(str, values))} "
                                "(limit the claim with `scales:`)",
                                where,
                            )

    def claim_ids(self) -> list[str]:
        """Each claim's id: its ``id``, or its index where it has none."""
        return [str(c.id) if "id" in c.model_fields_set else str(i) for i, c in enumerate(self.claims)]


# the keys whose values a registry lists: a variant axis `{each: KEY}` has one variant per registered value
EACH = {"model.attention": ATTENTIONS}


def each_variant(grid: dict, where: str) -> dict:
    """``grid`` with a ``variant: {each: KEY, with: {NAME: {key: value}}}`` axis written out: one variant per
    value of :data:`EACH`'s registry for KEY, in its order, named after it, setting KEY to it and the keys
    ``with`` gives for it (a new entry of the registry is a new variant, the manifest unchanged)."""
    axis = grid.get(VARIANT)
    if not isinstance(axis, dict) or "each" not in axis:  # a list of variants (or what _check_grid refuses)
        return grid
    where = f"{where}.{VARIANT}"
    key, extra = axis["each"], axis.get("with") or {}
    if set(axis) - {"each", "with"} or key not in EACH:
        raise refuse(f"expected {{each: KEY, with: {{NAME: {{key: value}}}}}}, KEY one of {', '.join(EACH)}", where)
    registered = EACH[key]
    if not isinstance(extra, dict) or not all(n in registered and isinstance(v, dict) for n, v in extra.items()):
        raise refuse(f"with: expected a mapping of {', '.join(registered)} to mappings of dotted keys", where)
    return {**grid, VARIANT: [{"name": name, key: name, **extra.get(name, {})} for name in registered]}


def _check_grid(where: str, grid: Any, base: dict, known: dict) -> None:
    """A grid: dotted keys set in ``base`` (or in ``known``, the manifest's grid) to non-empty lists;
    ``variant``: named override mappings."""
    if not isinstance(grid, dict):
        raise refuse("expected a mapping of dotted keys to lists", where)
    for key, values in grid.items():
        if key == VARIANT:
            names = [v.get("name") if isinstance(v, dict) else None for v in values or [None]]
            if not isinstance(values, list) or not all(isinstance(n, str) for n in names):
                raise refuse("expected a list of mappings, each with a name", f"{where}.{key}")
            if len(set(names)) != len(names):
                raise refuse("variant names must be unique", f"{where}.{key}")
            continue
        if key not in known and not _has(base, key):
            raise refuse(_unset_key(key, base, known), f"{where}.{key}")
        if not isinstance(values, list) or not values:
            raise refuse("expected a non-empty list of values", f"{where}.{key}")


def _unset_key(key: str, base: dict, known: dict) -> str:
    """Why grid key ``key`` (set neither in ``base`` nor in ``known``) is refused: a key of the run's schema
    that base does not set, or an unknown key, with the closest key of its section (of every section where
    the section is misspelt) that base sets or the schema has."""
    key, schema = str(key), _schema_keys(_family(base))
    if key in schema:
        return "grid key is not set in base"
    section = key.split(".")[0]
    set_here = sorted({*_leaves(base), *known} - {VARIANT})
    for pool in (set_here, sorted(schema)):  # a key base sets first: only those may be grid keys
        if section in SECTIONS:  # the key within its section against the section's keys
            rest = {k.split(".", 1)[1]: k for k in pool if k.startswith(section + ".")}
            close = [rest[c] for c in difflib.get_close_matches(key.split(".", 1)[-1], list(rest), n=1, cutoff=0.6)]
        else:
            close = difflib.get_close_matches(key, pool, n=1, cutoff=0.6)
        if close:
            return f"unknown key; did you mean {close[0]}?"
    if section not in SECTIONS:
        return f"unknown key; a grid key starts with its section: {', '.join(sorted(SECTIONS))}"
    if schema:  # none: the model family is unknown (its own check names it)
        return f"unknown key; keys set in base: {', '.join(k for k in set_here if k.startswith(section + '.'))}"
    return "grid key is not set in base"


def _schema_keys(family: str | None) -> set[str]:
    """Every dotted key a run spec has: data, train and eval, and the model keys of ``family`` (none of an
    unknown family), nested sections (``model.span.limit``) by their leaves."""
    sections = {"data": DataSpec, "train": TrainSpec, "eval": EvalSpec}
    if family in FAMILIES:
        sections["model"] = FAMILIES[family]
    out = {"model.family"} if family in FAMILIES else set()
    for name, cls in sections.items():
        out |= _fields(cls, name)
    return out


def _fields(cls: type[Section], prefix: str) -> set[str]:
    out = set()
    for name, info in cls.model_fields.items():
        inner = info.annotation
        if isinstance(inner, type) and issubclass(inner, Section):
            out |= _fields(inner, f"{prefix}.{name}")
        else:
            out.add(f"{prefix}.{name}")
    return out


def _leaves(tree: Any, prefix: str = "") -> list[str]:
    """The dotted keys of a mapping's leaves (``base``'s: what a grid key may name)."""
    if not isinstance(tree, dict):
        return [prefix] if prefix else []
    return [leaf for k, v in tree.items() for leaf in _leaves(v, f"{prefix}.{k}" if prefix else str(k))]


def _check_overrides(values: dict, axes: dict) -> None:
    """``set``/``sweep`` keys are dotted spec keys (their values are checked when the runs resolve)."""
    for where, given in (("set", values), ("sweep", axes)):
        for key in given:
            if key in SECTIONS:
                raise refuse(
                    f"sets the whole {key} section (its other keys back to their defaults); "
                    f"allowed: one of its keys, {key}.KEY=VALUE",
                    f"{where}.{key}",
                )
            if key == VARIANT or not isinstance(key, str) or key.split(".")[0] not in SECTIONS:
                raise refuse(
                    "expected a dotted key of data, model, train or eval (a variant is chosen with --only variant=NAME)",
                    f"{where}.{key}",
                )
    for key, vals in axes.items():
        if not isinstance(vals, list) or not vals:
            raise refuse("expected a non-empty list of values", f"sweep.{key}")


def _check_claim(where: str, check: str, family: str | None) -> None:
    """A check that parses and names only metrics a run of ``family`` stores (or spec keys)."""
    try:
        claims.parse(check)
        unknown = claim_checks.unknown_metrics(check, family)
    except claims.ClaimError as err:
        raise refuse(str(err), where) from None
    for metric, close in unknown:
        hint = f"; did you mean {' or '.join(close)}?" if close else f"; known: {', '.join(metrics.names(family))}"
        runs = f"{'an' if family[0] in 'aeiou' else 'a'} {family} run" if family else "any run"
        raise refuse(f"metric {metric!r} is not stored by {runs}{hint}", where)


def _check_split(where: str, check: str, split: str) -> None:
    """A check judged on the manifest's declared ``split`` (a sanity check may read either)."""
    other = claims.other_split(check, split)
    if other:
        raise refuse(
            f"names {other}, but the manifest judges its claims on the {split} split (top-level `split: "
            f"{split}`; one split per manifest: docs/reproducibility.md)",
            where,
        )


def _family(base: Any) -> str | None:
    """``base.model.family`` where base and model are mappings (the spec's own checks name anything else)."""
    model = base.get("model") if isinstance(base, dict) else None
    return model.get("family") if isinstance(model, dict) else None


def _has(tree: dict, dotted: str) -> bool:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True
