"""Dotted keys as the suite matches them, and values as its errors show them.

A key names a grid (or cell) key equal to it or ending in ``.key``: ``limit`` names ``model.span.limit``,
``span.limit`` too, ``imit`` nothing. Claims' filters, ``--only``, ``reference.runs``' ``match`` and the
report's paper values all match this way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def names(key: str, full: str) -> bool:
    """Whether ``key`` names the dotted key ``full``: equal to it, or a suffix of it after a dot."""
    return full == key or full.endswith("." + key)


def matching(key: str, keys: Iterable[str]) -> list[str]:
    """The keys of ``keys`` that ``key`` names, in their order."""
    return [k for k in keys if names(key, k)]


def show(value: Any) -> str:
    """A value as an error shows it: its type and (the start of) its repr; a mapping or list by its type."""
    return f"{type(value).__name__} {value!r}"[:80] if not isinstance(value, (dict, list)) else type(value).__name__
