"""What the commands share: the results root, the overrides, manifest selection, value formatting."""

from __future__ import annotations

import math
import os
from pathlib import Path

from repro.bounds import ALLOW_READ, TRUST_CODE
from repro.config import manifest as manifests
from repro.config import overrides
from repro.errors import UserError
from repro.progress import say
from repro.report import lookup
from repro.store.runs import results_root


def store_root(args) -> Path:
    return results_root(args.results)


def override_args(args) -> list[str]:
    return overrides.args_of(getattr(args, "overrides", []) or [], getattr(args, "multirun", False))


def select(args) -> list[manifests.Manifest]:
    found = lookup.select(args.name, override_args(args), store_root(args))
    if len(found) > 1:
        print(f"{args.name}: {len(found)} manifests: {', '.join(m.name for m in found)}", flush=True)
    return found


def at_scale(plan: list[manifests.Manifest], scale: str) -> list[manifests.Manifest]:
    """The manifests of a group (or a gathering manifest's parts) that have ``scale``, saying which were
    left out; an error only when none has it. One manifest is kept as it is (its own error names it)."""
    if len(plan) < 2:
        return plan
    kept = [m for m in plan if scale in m.scale_names()]
    if not kept:
        scales = "; ".join(f"{m.name}: {', '.join(m.scale_names())}" for m in plan)
        raise UserError(f"--scale {scale}: none of the {len(plan)} manifests has this scale (their scales: {scales})")
    left = [m.name for m in plan if m not in kept]
    if left:
        say(f"left out, no scale {scale!r}: {', '.join(left)}")
    return kept


def save(args, found: list[manifests.Manifest]) -> None:
    if not args.save:
        return
    if len(found) != 1 or not found[0].args:
        raise UserError("--save: needs one manifest and at least one KEY=VALUE override")
    print(f"wrote {overrides.save(found[0], Path(args.save))}")


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


def allow(folders: list[str], option: str = "--allow-read", variable: str = ALLOW_READ) -> None:
    """``--allow-read`` (or ``--trust-code``) folders into the environment, where processes started from
    here find them too."""
    for folder in folders:
        if not Path(folder).expanduser().is_dir():
            raise UserError(f"{option} {folder}: not a folder")
    if folders:
        known = [p for p in os.environ.get(variable, "").split(os.pathsep) if p]
        os.environ[variable] = os.pathsep.join([*known, *(str(Path(f).expanduser().resolve()) for f in folders)])


def trust_code(folders: list[str]) -> None:
    allow(folders, "--trust-code", TRUST_CODE)
