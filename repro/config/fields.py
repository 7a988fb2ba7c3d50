"""The schema of spec sections: a :class:`Section` is a pydantic model whose fields carry their type,
default and bounds in one line; :func:`build` validates a manifest's mapping against one and turns the
first fault into a one-line :class:`SpecError` naming the key path, the value and what is allowed.

Sections are strict (no key the schema lacks, no string for a number, no 1 for ``true``) with two
readings of YAML numbers: :data:`Float` takes the strings YAML 1.1 makes of ``2e-6`` and :data:`Int`
takes integral floats. Floats must be finite.

A run id hashes the resolved spec, so a new key would give every stored run a new id. A field declared
with :func:`later` is left out of the resolved spec while it holds its default (today's behaviour), so
every earlier spec keeps its id; set to anything else it enters the spec and the id like any other key.
"""

from __future__ import annotations

import copy
import typing
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from repro.config.keys import show
from repro.errors import UserError

_LATER = "repro_omitted_at_default"
_ID_NAMES = "repro_id_names"


class SpecError(UserError):
    """A manifest section does not match its schema. ``key`` is the dotted path of the offending key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class Section(BaseModel):
    """A spec section: unknown keys refused, types strict, floats finite."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _float(value: Any) -> Any:
    if isinstance(value, str):  # YAML 1.1 reads "2e-6" as a string
        try:
            return float(value)
        except ValueError:
            return value
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _int(value: Any) -> Any:
    value = int(value) if isinstance(value, float) and value.is_integer() else value
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise PydanticCustomError(
            "int_too_large",
            "got an integer of {bits} bits; allowed: at most 2**53 in size",
            {"bits": value.bit_length()},
        )
    return value


MAX_INT = 2**53  # integers beyond are no step count or size (and no longer exact as floats)


Float = Annotated[float, BeforeValidator(_float)]
Int = Annotated[int, BeforeValidator(_int)]


def later(default: Any, id_names: dict[str, str] | None = None, **bounds: Any) -> Any:
    """A field with ``default`` (and pydantic ``bounds``) that stays out of the resolved spec while it holds it.

    ``id_names``: a field whose values were renamed after runs were stored: each value's name when the
    ids were first computed, which the run id keeps hashing (:func:`plain` with ``identity``)."""
    extra = {_LATER: True, **({_ID_NAMES: id_names} if id_names else {})}
    if isinstance(default, (list, dict)):
        return Field(default_factory=lambda: copy.deepcopy(default), json_schema_extra=extra, **bounds)
    return Field(default, json_schema_extra=extra, **bounds)


def plain(value: Any, identity: bool = False) -> Any:
    """A spec section (nested sections, lists, dicts) as plain data, without :func:`later` fields at
    their defaults; ``identity``: renamed values under the names the run id hashes (:func:`later`)."""
    if isinstance(value, Section):
        out = {}
        for name, info in type(value).model_fields.items():
            item, extra = getattr(value, name), info.json_schema_extra or {}
            if extra.get(_LATER) and item == info.get_default(call_default_factory=True):
                continue
            out[name] = extra[_ID_NAMES].get(item, item) if identity and _ID_NAMES in extra else plain(item, identity)
        return out
    if isinstance(value, (list, tuple)):
        return [plain(v, identity) for v in value]
    if isinstance(value, dict):
        return {k: plain(v, identity) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float)):  # immutable: no copy (a spec holds thousands)
        return value
    return copy.deepcopy(value)


def build(cls: type[Section], data: Any, path: str = "") -> Any:
    """Section ``cls`` from ``data``, its keys, types and bounds validated (recursively); the first fault
    (an unknown key before any other) as a SpecError."""
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        errors = err.errors()
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        key = ".".join(p for p in [path, _dotted(first["loc"])] if p)
        raise SpecError(key, _message(cls, first)) from None


def _dotted(loc: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "string": "a string",
    "list": "a list",
    "model": "a mapping",
    "dict": "a mapping",
}
_SIGNS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}  # lower bounds first


def _message(cls: type[Section], error: dict[str, Any]) -> str:
    kind, value, loc = error["type"], error["input"], error["loc"]
    if kind == "extra_forbidden":
        return f"unknown key; allowed keys: {', '.join(sorted(_owner(cls, loc[:-1]).model_fields))}"
    if kind == "int_too_large":
        return error["msg"]
    if kind == "finite_number":
        return f"got {value!r}; allowed: a finite number"
    if kind == "literal_error":
        return f"expected one of {', '.join(map(str, typing.get_args(_annotation(cls, loc))))}, got {show(value)}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bounds = {k: v for m in _metadata(cls, loc) for k in _SIGNS if (v := getattr(m, k, None)) is not None}
        return f"got {value!r}; allowed: {' and '.join(f'{_SIGNS[k]} {v}' for k, v in bounds.items())}"
    for prefix, expected in _EXPECTED.items():
        if kind.startswith(prefix + "_"):
            return f"expected {expected}, got {show(value)}"
    return f"{error['msg']}, got {show(value)}"


def _owner(cls: type[Section], loc: tuple[str | int, ...]) -> type[Section]:
    """The section that the key path ``loc`` (from ``cls``) ends in."""
    for part in loc:
        if isinstance(part, str):
            cls = cls.model_fields[part].annotation
    return cls


def _annotation(cls: type[Section], loc: tuple[str | int, ...]) -> Any:
    """The type at key path ``loc``: a field's, or a list's element type, Optional and Annotated taken off."""
    names = [p for p in loc if isinstance(p, str)]
    tp = _owner(cls, tuple(names[:-1])).model_fields[names[-1]].annotation
    if isinstance(loc[-1], int):
        tp = typing.get_args(tp)[0]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, type(int | None)) and len(args) == 1:
        tp = args[0]
    return typing.get_args(tp)[0] if typing.get_origin(tp) is Annotated else tp


def _metadata(cls: type[Section], loc: tuple[str | int, ...]) -> list[Any]:
    """The constraints (annotated-types' Ge, Lt, ...) of the field or list element at ``loc``."""
    names = [p for p in loc if isinstance(p, str)]
    info = _owner(cls, tuple(names[:-1])).model_fields[names[-1]]
    if not isinstance(loc[-1], int):
        return info.metadata
    element = typing.get_args(info.annotation)[0]
    extra = typing.get_args(element)[1:] if typing.get_origin(element) is Annotated else ()
    return [m for e in extra for m in (e.metadata if isinstance(e, FieldInfo) else [e])]
