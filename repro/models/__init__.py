"""Model families. ``FAMILIES`` maps the manifest's ``model.family`` to the module that implements it."""

from __future__ import annotations

import importlib
from types import ModuleType

FAMILIES = {
    "sparse_transformer": "repro.models.sparse_transformer",
    "adaptive_span": "repro.models.adaptive_span",
}


def family(name: str) -> ModuleType:
    """The module of a model family (exposes ``Config`` and ``Model``)."""
    if name not in FAMILIES:
        raise KeyError(f"unknown model family {name!r}; expected one of {sorted(FAMILIES)}")
    return importlib.import_module(FAMILIES[name])
