"""What a command's manifest argument selects: a path, a name, or a group of names (every manifest whose
name ends with it: ``table1`` -> as-table1 and st-table1), among the discovered manifests and, after them,
the ones the run store was told about (manifests outside experiments/, command-line ablations); each
with the command line's overrides applied, and checked against the renderers it names (which the
manifest layer below cannot know: :func:`repro.report.renderers.check_manifest`)."""

from __future__ import annotations

from pathlib import Path

from repro.config import manifest, overrides
from repro.config.manifest import Manifest, ManifestError, discover, is_path, matching, read, resolve, unknown
from repro.report.renderers import check_manifest
from repro.store.runs import RunDir, sources


def load(path: Path, run_code: bool = False) -> Manifest:
    """The manifest file ``path``, fully checked (``run_code``: its own renderer files loaded, not only read)."""
    return check_manifest(manifest.load(path), run_code)


def select(ref: str, args: list[str], root: Path) -> list[Manifest]:
    """The manifests ``ref`` names (``root``: the results root), each with the override ``args`` (a
    gathering manifest stays as it is: :func:`with_parts` gives its parts the overrides)."""
    if is_path(ref):
        if not Path(ref).is_file():
            raise ManifestError(f"{ref}: no such manifest file")
        return [_derive(Path(ref), args)]
    known = discover()
    names = matching(ref, known)
    if names:
        return [_derive(known[n], args) for n in names]
    stored = sources(root)
    names = matching(ref, stored)
    if not names:
        raise unknown(ref, {**known, **stored})
    out = []
    for name in names:
        path = Path(stored[name]["path"])
        if not path.is_file():
            raise ManifestError(f"{name}: its manifest {path} (recorded in {root}/sources) no longer exists")
        out.append(check_manifest(overrides.derive(path, [*stored[name]["args"], *args])))
    return out


def _derive(path: Path, args: list[str]) -> Manifest:
    doc = read(path)
    return check_manifest(overrides.derive(path, [] if doc.get("base") is None and doc.get("parts") else args))


def one(ref: str, args: list[str], root: Path) -> Manifest:
    """Exactly one manifest (commands that act on one: pull, dashboard, --save)."""
    found = select(ref, args, root)
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
        for one_part in (
            [check_manifest(overrides.derive(part(m, p).path, args)) for p in m.parts] if gathering else [m]
        ):
            out.setdefault(one_part.name, one_part)
    return list(out.values())


def part(m: Manifest, name: str) -> Manifest:
    """The part ``name`` of the gathering manifest ``m``."""
    try:
        return check_manifest(resolve(name))
    except ManifestError as err:
        raise ManifestError(f"{m.path}: parts: {err}") from None


def base_name(m: Manifest) -> str:
    """The name of the manifest ``m`` derives from (its own name when it has no overrides): a derived
    manifest's name is its base's, a dot, then the suffix that records its ``set``/``sweep``."""
    tail = "." + overrides.suffix(m.set, m.sweep) if m.set or m.sweep else ""
    return m.name[: -len(tail)] if tail and m.name.endswith(tail) else m.name


def relatives_with_runs(m: Manifest, root: Path) -> list[tuple[str, int]]:
    """The other manifests of ``m``'s base stored under ``root`` (the base itself, manifests derived from
    it by overrides: ``as-table1.train.steps_100``), each with its number of finished runs, those with any."""
    base = base_name(m)
    found = []
    for folder in sorted((root / "runs").glob(f"{base}*")):
        name = folder.name
        if name == m.name or not (name == base or name.startswith(base + ".")) or not folder.is_dir():
            continue
        done = sum(RunDir(root, name, s.parent.name).finished for s in folder.glob("*/summary.json"))
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
