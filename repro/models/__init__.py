"""Model families: ``repro.models.<family>`` implements the family that ``model.family`` names, its
``model`` section's schema being ``repro.config.families.FAMILIES[<family>]``."""

from __future__ import annotations

import importlib
from types import ModuleType

from repro.config.families import FAMILIES


def family(name: str) -> ModuleType:
    """The module of a model family (exposes ``Config`` and ``Model``)."""
    if name not in FAMILIES:
        raise KeyError(f"unknown model family {name!r}; expected one of {sorted(FAMILIES)}")
    return importlib.import_module(f"{__name__}.{name}")
