"""A report's word on a manifest with no stored runs: the stored manifests of the same base with other
overrides (``as-table1.train.steps_100``), each its own report."""

from __future__ import annotations

from pathlib import Path

from repro.config.lookup import base_name
from repro.config.manifest import Manifest
from repro.store.runs import RunDir, link_of


def relatives_with_runs(m: Manifest, root: Path) -> list[tuple[str, int]]:
    """The other manifests of ``m``'s base stored under ``root`` (the base itself, manifests derived from
    it by overrides: ``as-table1.train.steps_100``), each with its number of finished runs, those with any.
    A symbolic link in place of a run's folder or a manifest's is not followed: no stored run of it counts."""
    base = base_name(m)
    found = []
    for folder in sorted((root / "runs").glob(f"{base}*")):
        name = folder.name
        if name == m.name or not (name == base or name.startswith(base + ".")) or not folder.is_dir():
            continue
        done = sum(
            RunDir(root, name, s.parent.name).finished for s in folder.glob("*/summary.json") if not link_of(s.parent)
        )
        if done:
            found.append((name, done))
    return found


def elsewhere(m: Manifest, root: Path) -> list[str]:
    """Report lines for a manifest with no stored runs: the relatives of :func:`relatives_with_runs` and
    the command that reports each (none: no line)."""
    found = relatives_with_runs(m, root)
    if not found:
        return []
    lines = ["Stored runs of the same manifest with other overrides (each its own report):", ""]
    lines += [f"- `{name}`: {done} finished run(s); `repro report {name}`" for name, done in found]
    return [*lines, ""]
