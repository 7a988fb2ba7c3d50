"""Spec fields added after run ids were first stored, and the plain-dict form of a spec section.

A run id hashes the resolved spec, so a new key would give every stored run a new id. A field declared
with :func:`later` is left out of the resolved spec while it holds its default (today's behaviour), so
every earlier spec keeps its id; set to anything else it enters the spec and the id like any other key.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

_LATER = "repro_omitted_at_default"


def later(default: Any) -> Any:
    """A dataclass field with ``default`` that stays out of the resolved spec while it holds it."""
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata={_LATER: True})
    return dataclasses.field(default=default, metadata={_LATER: True})


def plain(value: Any) -> Any:
    """A spec section (nested dataclasses, lists, dicts) as plain data, without :func:`later` fields at
    their defaults."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.metadata.get(_LATER) and item == _default(f):
                continue
            out[f.name] = plain(item)
        return out
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return copy.deepcopy(value)


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
