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
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from repro.config.keys import show
from repro.errors import UserError

_LATER = "repro_omitted_at_default"
_KEEP = object()  # expect(): no default for an empty value
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


def refuse(message: str, key: str = "") -> PydanticCustomError:
    """A rule's fault, raised in a validator: ``message`` for ``key`` (dotted, from the model validated)."""
    return PydanticCustomError("repro_rule", "{message}", {"message": message, "key": key})


def expect(test: Callable[[Any], bool], message: str | Callable[[Any], str], empty: Any = _KEEP) -> BeforeValidator:
    """A field checked by ``test`` and refused in its own words (``message``, or a function of the value);
    with ``empty``, a null or empty value reads as that default (``renders:`` with nothing is no renderer)."""

    def check(value: Any) -> Any:
        if empty is not _KEEP and not value:
            return copy.deepcopy(empty)
        if not test(value):
            raise refuse(message(value) if callable(message) else message)
        return value

    return BeforeValidator(check)


def build(cls: type[Section], data: Any, path: str = "") -> Any:
    """Model ``cls`` from ``data``, its keys, types, bounds and rules validated (recursively); the first
    fault as a SpecError (:func:`fault`)."""
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise fault(cls, err, path) from None


def fault(cls: type[Section], err: ValidationError, path: str = "") -> SpecError:
    """The first fault of a validation of ``cls`` in one line: its dotted key (under ``path``), the value and
    what was expected. An unknown key comes first, then a missing one; a model with a ``shape`` (a claim)
    is refused as a whole, in its words, for an unknown, missing or mistyped key."""
    errors = err.errors()
    first = min(errors, key=lambda e: _ORDER.get(e["type"], len(_ORDER)))
    loc, message = first["loc"], None
    if first["type"] in ("extra_forbidden", "missing", "model_type"):
        at = loc if first["type"] == "model_type" else loc[:-1]
        shape = getattr(_owner(cls, at), "shape", None)
        if shape:
            loc, message = at, shape
    if first["type"] == "repro_rule":
        key = first["ctx"]["key"]
        loc, message = (*loc, key) if key else loc, first["ctx"]["message"]
    key = ".".join(p for p in [path, _dotted(loc)] if p)
    return SpecError(key, message or _message(cls, first))


_ORDER = {"extra_forbidden": 0, "missing": 1}


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
    if kind == "missing":
        return "required key is missing"
    if kind == "int_too_large":
        return error["msg"]
    if kind == "finite_number":
        return f"got {value!r}; allowed: a finite number"
    if kind == "literal_error":
        return f"expected one of {', '.join(map(str, typing.get_args(_owner(cls, loc))))}, got {show(value)}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bounds = {k: v for m in _metadata(cls, loc) for k in _SIGNS if (v := getattr(m, k, None)) is not None}
        return f"got {value!r}; allowed: {' and '.join(f'{_SIGNS[k]} {v}' for k, v in bounds.items())}"
    for prefix, expected in _EXPECTED.items():
        if kind.startswith(prefix + "_"):
            return f"expected {expected}, got {show(value)}"
    return f"{error['msg']}, got {show(value)}"


def _bare(tp: Any) -> Any:
    """A type without Annotated and Optional around it."""
    while True:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        union = typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1
        if typing.get_origin(tp) is Annotated or union:
            tp = args[0]
        else:
            return tp


def _step(tp: Any, part: str | int) -> Any:
    """The type one key below ``tp``: a model's field, a list's element or a mapping's value."""
    tp = _bare(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
        return tp.model_fields[part].annotation
    args = typing.get_args(tp)
    return args[-1] if args else Any


def _owner(cls: type[Section], loc: tuple[str | int, ...]) -> Any:
    """The type at key path ``loc`` from ``cls`` (a section, for a key's parent), Annotated and Optional off."""
    tp: Any = cls
    for part in loc:
        tp = _step(tp, part)
    return _bare(tp)


def _metadata(cls: type[Section], loc: tuple[str | int, ...]) -> list[Any]:
    """The constraints (annotated-types' Ge, Lt, ...) of the field or list element at ``loc``."""
    names = [p for p in loc if isinstance(p, str)]
    info = _owner(cls, tuple(names[:-1])).model_fields[names[-1]]
    if not isinstance(loc[-1], int):
        return info.metadata
    element = typing.get_args(info.annotation)[0]
    extra = typing.get_args(element)[1:] if typing.get_origin(element) is Annotated else ()
    return [m for e in extra for m in (e.metadata if isinstance(e, FieldInfo) else [e])]
