"""What a manifest's ``renders`` may name, read from the renderer files' source without running them.

A renderer file declares each renderer with ``@renderer("name", reference={...})`` (``repro.report.renderers``);
the names and the reference keys (with their types) are read from its syntax tree, so that every command
checks a manifest's ``renders`` and ``reference`` before anything trains, and no command but ``repro
report`` and ``repro validate --renderers`` runs a renderer file (``docs/faults.md``).

The declarations are those that register each renderer in ``repro.report.renderers.RENDERERS`` when the
file loads (the suite's one registry pattern, :mod:`repro.registry`); read here from the source, because a
manifest's own renderer file is code the user has not yet asked to run, and the shipped ones import
matplotlib and seaborn. Which files: every ``*.py`` at the top of analysis/ whose name does not start with
``_`` (a new figure is a new file; a ``_`` file is never loaded as one) and those the manifest names.
"""

from __future__ import annotations

import ast
import builtins
import functools
from pathlib import Path

from repro.config.keys import show
from repro.config.manifest import Manifest, ManifestError, analysis_root

Reference = dict[str, type | tuple[type, ...]]  # a renderer's reference keys and the type of each


def shipped() -> list[Path]:
    """The shipped renderer files: every ``*.py`` at the top of analysis/ (``$REPRO_ANALYSIS``) whose name
    does not start with ``_``."""
    return sorted(p for p in analysis_root().glob("*.py") if not p.name.startswith("_"))


def declared(path: Path) -> dict[str, Reference]:
    """The renderers a file declares (``@renderer("name", reference={...})``) and the reference keys each
    reads, read from its source without running it; a reference type that is not a builtin type's name
    accepts any value. ManifestError for a file that is not Python."""
    try:
        st = Path(path).stat()
    except OSError as err:
        raise ManifestError(f"{path}: the renderer file does not parse: {type(err).__name__}: {err}") from None
    return _declared(Path(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _declared(path: Path, size: int, mtime_ns: int) -> dict[str, Reference]:
    """:func:`declared`, parsed once per (path, size, mtime): every manifest of a command reads the shipped files."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError) as err:
        raise ManifestError(f"{path}: the renderer file does not parse: {type(err).__name__}: {err}") from None
    out = {}
    for node in ast.walk(tree):
        for call in getattr(node, "decorator_list", []):
            func = getattr(call, "func", None)
            if getattr(func, "id", getattr(func, "attr", None)) != "renderer" or not call.args:
                continue
            if isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
                keywords = {k.arg: k.value for k in call.keywords}
                out[call.args[0].value] = _reference_types(keywords.get("reference"))
    return out


def _reference_types(node: ast.AST | None) -> Reference:
    if not isinstance(node, ast.Dict):
        return {}
    out = {}
    for key, value in zip(node.keys, node.values):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names = value.elts if isinstance(value, ast.Tuple) else [value]
            types = tuple(getattr(builtins, getattr(n, "id", ""), None) for n in names)
            out[key.value] = types if all(isinstance(t, type) for t in types) else object
    return out


def type_name(tp: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in (tp if isinstance(tp, tuple) else (tp,)))


def check_declared(manifest: Manifest) -> Manifest:
    """:func:`check` against what the shipped files and the manifest's own declare (none of them run)."""
    known: dict[str, Reference] = {}
    where: dict[str, Path] = {}
    for path in [*shipped(), *map(Path, manifest.analysis)]:
        for name, reference in declared(path).items():
            if where.get(name, path.resolve()) != path.resolve():
                raise ManifestError(f"{path}: renderer {name!r} is already defined in {where[name]}")
            known[name], where[name] = reference, path.resolve()
    return check(manifest, known)


def check(manifest: Manifest, known: dict[str, Reference]) -> Manifest:
    """``manifest`` if its ``renders`` name renderers of ``known`` and its ``reference`` holds, besides
    ``runs`` (checked with the manifest), only keys they read, each of the type they declare; else
    ManifestError."""
    unknown = sorted(set(manifest.renders) - set(known))
    if unknown:
        raise ManifestError(
            f"{manifest.path}: renders: unknown renderer {unknown[0]!r}; known: {', '.join(sorted(known))}"
        )
    where = f"{manifest.path}: reference"
    declared_keys = {key: tp for name in manifest.renders for key, tp in known[name].items()}
    for key, value in manifest.reference.items():
        if key == "runs":
            continue
        if key not in declared_keys:
            allowed = ", ".join(sorted({"runs", *declared_keys}))
            raise ManifestError(f"{where}.{key}: unknown key; the renderers {manifest.renders} read: {allowed}")
        if not isinstance(value, declared_keys[key]):
            raise ManifestError(f"{where}.{key}: expected {type_name(declared_keys[key])}, got {show(value)}")
    return manifest
