"""A manifest's document (its file, includes merged) as pydantic models: each top-level key's type and
what it must hold in one line, and the rules between keys (a grid key is set in ``base``, a claim names
metrics its family stores, the headline names a claim) as model validators. :func:`repro.config.fields.build`
turns the first fault into the one line that names the key, the value and what was expected;
:mod:`repro.config.manifest` makes the Manifest of a valid document (docs/manifests.md: every key).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, model_validator

from repro.config import claims, metrics
from repro.config.fields import Section, expect, refuse
from repro.config.keys import show
from repro.config.spec import SECTIONS

VARIANT = "variant"  # the grid key whose values are named override mappings


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _seeds(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _seeds_message(value: Any) -> str:
    return f"expected a positive number of seeds per grid cell, got {show(value)}"


Name = Annotated[str, expect(lambda v: isinstance(v, str), lambda v: f"expected a string, got {v!r}")]
Str = Annotated[str, BeforeValidator(str)]  # a claim's text and check: anything, as text
Text = Annotated[str, BeforeValidator(lambda v: str(v or ""))]  # description, notes: anything, as text (null: none)
Strings = Annotated[list[str], expect(_strings, "expected a list of strings", empty=[])]
Mapping = Annotated[dict, expect(lambda v: isinstance(v, dict), "expected a mapping", empty={})]
Seeds = Annotated[int, expect(_seeds, _seeds_message)]
Scale = Annotated[dict, expect(lambda v: isinstance(v, dict), "expected a mapping of overrides")]


class ClaimDocument(Section):
    """One of ``claims:``: a finding written as a check (:mod:`repro.config.claims`)."""

    shape: ClassVar[str] = "expected a mapping with id, text, check (and scales, requires)"

    id: Any = None  # default: the claim's index
    text: Str = ""
    check: Str
    scales: Annotated[
        list[str] | None, expect(lambda v: v is None or _strings(v), "expected a list of scale names")
    ] = None  # judged only at these scales (None: every scale)
    requires: Strings = Field(default_factory=list)  # preconditions, after the manifest's


class Document(Section):
    """A manifest file's top-level keys (``include:`` is merged away before: repro.config.manifest.read)."""

    name: Name
    title: Name
    paper: Name
    base: Annotated[Any, expect(lambda v: isinstance(v or {}, dict), "expected a mapping")] = None
    grid: Mapping = Field(default_factory=dict)
    scales: Annotated[dict[Any, Scale], expect(lambda v: isinstance(v, dict), "expected a mapping", empty={})] = Field(
        default_factory=dict
    )
    reference: Mapping = Field(default_factory=dict)
    set: Mapping = Field(default_factory=dict)
    sweep: Mapping = Field(default_factory=dict)
    seeds: Seeds = 1
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
            _check_claim(f"claims[{i}]", claim.check, family)
        ids = self.claim_ids()
        if self.headline is not None and str(self.headline) not in ids:
            raise refuse(f"{self.headline!r} names no claim; claims: {', '.join(ids) or 'none'}", "headline")
        return self

    def claim_ids(self) -> list[str]:
        """Each claim's id: its ``id``, or its index where it has none."""
        return [str(c.id) if "id" in c.model_fields_set else str(i) for i, c in enumerate(self.claims)]


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
            raise refuse("grid key is not set in base", f"{where}.{key}")
        if not isinstance(values, list) or not values:
            raise refuse("expected a non-empty list of values", f"{where}.{key}")


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
        unknown = claims.unknown_metrics(check, family)
    except claims.ClaimError as err:
        raise refuse(str(err), where) from None
    for metric, close in unknown:
        hint = f"; did you mean {' or '.join(close)}?" if close else f"; known: {', '.join(metrics.names(family))}"
        raise refuse(f"metric {metric!r} is not stored by a {family or 'any'} run{hint}", where)


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
