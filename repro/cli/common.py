"""What the commands share: the results root, the folders the user allowed, the overrides, manifest
selection (:mod:`repro.plan.selection`), value formatting."""

from __future__ import annotations

import math
import os
from pathlib import Path

from repro.bounds import ALLOW_READ, TRUST_CODE
from repro.config import manifest as manifests
from repro.config import overrides
from repro.config.access import Access
from repro.errors import UserError
from repro.plan import selection
from repro.store.runs import results_root


def store_root(args) -> Path:
    return results_root(args.results)


def override_args(args) -> list[str]:
    return overrides.args_of(getattr(args, "overrides", []) or [], getattr(args, "multirun", False))


def select(args) -> list[manifests.Manifest]:
    return selection.select(args.name, override_args(args), store_root(args), args.access)


def json_value(value):
    """numpy/pandas scalars as Python's, NaN and infinities as None (JSON has neither)."""
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and not math.isfinite(value) else value


def fmt(value) -> str:
    if isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def access(args) -> Access:
    """The folders the user allowed manifests beyond their own, read once, here: ``$REPRO_ALLOW_READ``
    and ``$REPRO_TRUST_CODE`` (``:``-separated), then each ``--allow-read`` and ``--trust-code`` folder
    (which must be one). Passed on as a value: to the manifests loaded, and to the jobs started."""
    return Access(
        read=_folders(ALLOW_READ, "--allow-read", getattr(args, "allow_read", None) or []),
        code=_folders(TRUST_CODE, "--trust-code", getattr(args, "trust_code", None) or []),
    )


def _folders(variable: str, option: str, given: list[str]) -> tuple[Path, ...]:
    for folder in given:
        if not Path(folder).expanduser().is_dir():
            raise UserError(f"{option} {folder}: not a folder")
    named = [p for p in os.environ.get(variable, "").split(os.pathsep) if p]
    return tuple(dict.fromkeys(Path(p).expanduser().resolve() for p in [*named, *given]))
