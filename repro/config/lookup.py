"""What a command's manifest argument selects: a path, a name, or a group of names (every manifest whose
name ends with it: ``table1`` -> as-table1 and st-table1), among the discovered manifests and, after them,
the ones the run store was told about (manifests outside experiments/, command-line ablations: passed in
by the command as :class:`Stored`); each with the command line's overrides applied, loaded with the
folders the user allowed (:class:`repro.config.access.Access`), and its ``renders`` checked against what
the renderer files declare, read without running them (:func:`repro.config.renderer_names.check_declared`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.config import manifest, overrides, renderer_names
from repro.config.access import NONE, Access
from repro.config.manifest import (
    LOCAL,
    Manifest,
    ManifestError,
    discover,
    experiments_root,
    is_path,
    matching,
    read,
    resolve,
    unknown,
)


@dataclass(frozen=True)
class Stored:
    """What the run store knows of manifests discovery does not find: name -> {path, args}
    (the store's ``sources``, read by the command), and where it keeps that record (named in errors)."""

    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    where: str = "the store's sources"


NOTHING_STORED = Stored()


def load(path: Path, access: Access = NONE) -> Manifest:
    """The manifest file ``path``, fully checked (its renderer files read, not run)."""
    return renderer_names.check_declared(manifest.load(path, access))


def select(ref: str, args: list[str], stored: Stored = NOTHING_STORED, access: Access = NONE) -> list[Manifest]:
    """The manifests ``ref`` names, each with the override ``args`` (a gathering manifest stays as it is:
    :func:`with_parts` gives its parts the overrides)."""
    if is_path(ref):
        if not os.path.lexists(ref):  # anything else there (a loop of links, a device) is named as it reads
            raise ManifestError(f"{ref}: no such manifest file")
        return [_derive(Path(ref), args, access)]
    known = discover()
    names = matching(ref, known)
    if names:
        return [_derive(known[n], args, access) for n in names]
    names = matching(ref, stored.sources)
    if not names:
        raise ManifestError(
            f"{unknown(ref, {**known, **stored.sources})} (names: the manifests under {experiments_root()}/, "
            f"your own in its {LOCAL}/ among them, and those run by path into this results root: {stored.where})"
        )
    out = []
    for name in names:
        path = Path(stored.sources[name]["path"])
        if not path.is_file():
            raise ManifestError(f"{name}: its manifest {path} (recorded in {stored.where}) no longer exists")
        out.append(
            renderer_names.check_declared(overrides.derive(path, [*stored.sources[name]["args"], *args], access))
        )
    return out


def _derive(path: Path, args: list[str], access: Access) -> Manifest:
    doc = read(path, access=access)
    gathering = doc.get("base") is None and doc.get("parts")
    return renderer_names.check_declared(overrides.derive(path, [] if gathering else args, access))


def one(ref: str, args: list[str], stored: Stored = NOTHING_STORED, access: Access = NONE) -> Manifest:
    """Exactly one manifest (commands that act on one: pull, dashboard, --save)."""
    found = select(ref, args, stored, access)
    if len(found) > 1:
        raise ManifestError(
            f"{ref!r} names {len(found)} manifests ({', '.join(m.name for m in found)}); name one of them"
        )
    return found[0]


def with_parts(found: list[Manifest], args: list[str]) -> list[Manifest]:
    """``found`` with each gathering manifest (``parts``, no runs of its own) replaced by its parts, once each."""
    out: dict[str, Manifest] = {}
    for m in found:
        gathering = m.base is None and m.parts
        for one_part in [_with_args(part(m, p), args) for p in m.parts] if gathering else [m]:
            out.setdefault(one_part.name, one_part)
    return list(out.values())


def _with_args(m: Manifest, args: list[str]) -> Manifest:
    """``m`` with the override ``args`` (``m`` itself when there are none: it is not read again)."""
    return renderer_names.check_declared(overrides.derive(m.path, args, m.access)) if args else m


def part(m: Manifest, name: str) -> Manifest:
    """The part ``name`` of the gathering manifest ``m`` (loaded with the folders ``m`` was allowed)."""
    try:
        return renderer_names.check_declared(resolve(name, access=m.access))
    except ManifestError as err:
        raise ManifestError(f"{m.path}: parts: {err}") from None


def base_name(m: Manifest) -> str:
    """The name of the manifest ``m`` derives from (its own name when it has no overrides): a derived
    manifest's name is its base's, a dot, then the suffix that records its ``set``/``sweep``."""
    tail = "." + overrides.suffix(m.set, m.sweep) if m.set or m.sweep else ""
    return m.name[: -len(tail)] if tail and m.name.endswith(tail) else m.name
