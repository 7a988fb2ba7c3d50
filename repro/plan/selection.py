"""A command's selection, before any plan: the manifests a NAME (a name, a group, a path) and its override
arguments select (:func:`repro.config.lookup.select`, with what the results root knows of manifests outside
experiments/), those of them that have a scale, and one manifest with its overrides saved as a file of its
own (``--save``). Shared by ``repro run`` (:mod:`repro.session.run`) and the commands that show or report a
selection (through :mod:`repro.cli.common`). No torch here."""

from __future__ import annotations

from pathlib import Path

from repro.config import lookup, overrides
from repro.config.access import Access
from repro.config.manifest import Manifest
from repro.errors import UserError
from repro.progress import say
from repro.store.runs import sources


def stored(root: Path) -> lookup.Stored:
    """What the results root knows of manifests outside experiments/ (by the names they were run with)."""
    return lookup.Stored(sources(root), f"{root}/sources")


def select(name: str, args: list[str], root: Path, access: Access) -> list[Manifest]:
    """The manifests ``name`` selects with the override ``args``, saying how many when a group names
    several."""
    found = lookup.select(name, args, stored(root), access)
    if len(found) > 1:
        print(f"{name}: {len(found)} manifests: {', '.join(m.name for m in found)}", flush=True)
    return found


def at_scale(plan: list[Manifest], scale: str) -> list[Manifest]:
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


def save(found: list[Manifest], path: str | None) -> None:
    """``--save PATH``: the one manifest selected, with its overrides, written as a manifest file."""
    if not path:
        return
    if len(found) != 1 or not found[0].args:
        raise UserError("--save: needs one manifest and at least one KEY=VALUE override")
    print(f"wrote {overrides.save(found[0], Path(path))}")
