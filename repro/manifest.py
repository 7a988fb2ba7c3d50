"""Manifests: one YAML per paper table/figure/ablation, expanded into RunSpecs.

``base`` is the paper's configuration, ``grid`` maps dotted keys to value lists (cartesian product),
``scales`` deep-merge overrides into ``base`` (a scale may also replace grid lists with its own ``grid``),
``reference`` holds the paper's numbers, ``claims`` the paper's findings as checks (``repro.claims``).
The scale ``paper`` is ``base`` itself unless the manifest overrides it. A manifest without ``base``
trains nothing: its renderers draw from the manifest alone (e.g. a mask function, a pattern picture).
"""
from __future__ import annotations

import copy
import difflib
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from repro import claims
from repro.errors import UserError
from repro.spec import RunSpec, SpecError, build_run

TOP_KEYS = {"name", "title", "paper", "renders", "description", "base", "grid", "scales", "reference",
            "claims", "notes"}
SCALES = ("tiny", "small", "paper")
VARIANT = "variant"  # the grid key whose values are named override mappings
SHIPPED = Path(__file__).resolve().parent.parent / "experiments"


def experiments_root() -> Path:
    """Where manifests are discovered: ``$REPRO_EXPERIMENTS`` or the repository's experiments/."""
    return Path(os.environ.get("REPRO_EXPERIMENTS") or SHIPPED)


class ManifestError(UserError):
    pass


@dataclass
class Claim:
    id: str
    text: str
    check: str
    scales: list[str] | None = None  # judged only at these scales (None: every scale)


@dataclass
class Manifest:
    name: str
    title: str
    paper: str
    path: Path
    base: dict[str, Any] | None
    grid: dict[str, list[Any]] = field(default_factory=dict)
    scales: dict[str, dict[str, Any]] = field(default_factory=dict)
    renders: list[str] = field(default_factory=list)
    reference: dict[str, Any] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    description: str = ""
    notes: str = ""

    def grid_for(self, scale: str) -> dict[str, list[Any]]:
        return {**self.grid, **(self.scales.get(scale, {}).get("grid") or {})}

    def expand(self, scale: str) -> list[RunSpec]:
        """Every run of the manifest at ``scale``, in grid order."""
        if scale not in self.scale_names():
            raise ManifestError(f"{self.path}: unknown scale {scale!r}; this manifest has: "
                                f"{', '.join(self.scale_names())}")
        if self.base is None:
            return []
        overrides = {k: v for k, v in self.scales.get(scale, {}).items() if k != "grid"}
        config = _merge(copy.deepcopy(self.base), overrides)
        grid = self.grid_for(scale)
        runs = []
        for values in itertools.product(*grid.values()):
            cell = dict(zip(grid, values))
            resolved = copy.deepcopy(config)
            for key, value in cell.items():
                for k, v in (value.items() if key == VARIANT else [(key, value)]):
                    if not (key == VARIANT and k == "name"):
                        _set(resolved, k, v)
            cell = {k: v["name"] if k == VARIANT else v for k, v in cell.items()}
            try:
                runs.append(build_run(self.name, scale, cell, resolved))
            except SpecError as err:
                where = f" (grid cell {cell})" if cell else ""
                raise ManifestError(f"{self.path}: {err}{where}") from None
        return runs

    def scale_names(self) -> list[str]:
        return [s for s in SCALES if s == "paper" or s in self.scales] + \
            [s for s in self.scales if s not in SCALES]


def load(path: str | Path) -> Manifest:
    """Read and validate one manifest file (every scale is expanded once to check it)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ManifestError(f"{where}: YAML syntax error: {getattr(err, 'problem', None) or err}") from None
    except OSError as err:
        raise ManifestError(f"{path}: cannot read: {err.strerror}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: expected a mapping at the top level")
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise ManifestError(f"{path}: {unknown[0]}: unknown key; allowed keys: {', '.join(sorted(TOP_KEYS))}")
    for key in ("name", "title", "paper"):
        if key not in data:
            raise ManifestError(f"{path}: {key}: required key is missing")
    for key in ("name", "title", "paper"):
        if not isinstance(data[key], str):
            raise ManifestError(f"{path}: {key}: expected a string, got {data[key]!r}")
    for key in ("base", "grid", "scales", "reference"):
        if not isinstance(data.get(key) or {}, dict):
            raise ManifestError(f"{path}: {key}: expected a mapping")
    grid = data.get("grid") or {}
    scales = data.get("scales") or {}
    for name, over in scales.items():
        if not isinstance(over, dict):
            raise ManifestError(f"{path}: scales.{name}: expected a mapping of overrides")
        _check_grid(path, f"scales.{name}.grid", over.get("grid") or {}, data.get("base") or {}, grid)
    if "base" not in data and (grid or scales):
        raise ManifestError(f"{path}: base: required when the manifest has a grid or scales")
    _check_grid(path, "grid", grid, data.get("base") or {}, {})
    manifest = Manifest(
        name=data["name"], title=data["title"], paper=data["paper"], path=path, base=data.get("base"),
        grid=grid, scales=scales, renders=_str_list(path, "renders", data.get("renders") or []),
        reference=data.get("reference") or {}, claims=_claims(path, data.get("claims") or []),
        description=str(data.get("description") or ""), notes=str(data.get("notes") or ""),
    )
    from repro.analysis import registry  # here, not at import: renderer modules import pandas/numpy

    unknown_renders = sorted(set(manifest.renders) - set(registry()))
    if unknown_renders:
        raise ManifestError(f"{path}: renders: unknown renderer {unknown_renders[0]!r}; "
                            f"known: {', '.join(sorted(registry()))}")
    for scale in manifest.scale_names():
        manifest.expand(scale)
    return manifest


def _check_grid(path: Path, where: str, grid: Any, base: dict, known: dict) -> None:
    if not isinstance(grid, dict):
        raise ManifestError(f"{path}: {where}: expected a mapping of dotted keys to lists")
    for key, values in grid.items():
        if key == VARIANT:
            names = [v.get("name") if isinstance(v, dict) else None for v in values or [None]]
            if not isinstance(values, list) or not all(isinstance(n, str) for n in names):
                raise ManifestError(f"{path}: {where}.{key}: expected a list of mappings, each with a name")
            if len(set(names)) != len(names):
                raise ManifestError(f"{path}: {where}.{key}: variant names must be unique")
            continue
        if key not in known and not _has(base, key):
            raise ManifestError(f"{path}: {where}.{key}: grid key is not set in base")
        if not isinstance(values, list) or not values:
            raise ManifestError(f"{path}: {where}.{key}: expected a non-empty list of values")


def _claims(path: Path, items: Any) -> list[Claim]:
    if not isinstance(items, list):
        raise ManifestError(f"{path}: claims: expected a list")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or set(item) - {"id", "text", "check", "scales"} or "check" not in item:
            raise ManifestError(f"{path}: claims[{i}]: expected a mapping with id, text, check (and scales)")
        scales = item.get("scales")
        if scales is not None and not (isinstance(scales, list) and all(isinstance(x, str) for x in scales)):
            raise ManifestError(f"{path}: claims[{i}].scales: expected a list of scale names")
        try:
            claims.parse(str(item["check"]))
        except claims.ClaimError as err:
            raise ManifestError(f"{path}: claims[{i}]: {err}") from None
        out.append(Claim(id=str(item.get("id", i)), text=str(item.get("text", "")), check=str(item["check"]),
                         scales=scales))
    return out


def _str_list(path: Path, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ManifestError(f"{path}: {key}: expected a list of strings")
    return value


def _merge(base: dict, over: dict) -> dict:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _has(tree: dict, dotted: str) -> bool:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _set(tree: dict, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = copy.deepcopy(value)


# -- the registry of manifests ---------------------------------------------------------------

def discover(root: Path | None = None) -> dict[str, Path]:
    """Every manifest under ``root`` (default: :func:`experiments_root`) by name (its ``name`` key)."""
    root = root or experiments_root()
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.yaml")):
        try:
            name = (yaml.safe_load(path.read_text()) or {}).get("name")
        except (yaml.YAMLError, AttributeError):
            name = None
        found[name if isinstance(name, str) else str(path)] = path
    return found


def resolve(ref: str, root: Path | None = None) -> Manifest:
    """A manifest by name, path, or unique suffix of its name (``table1`` -> ``as-table1``)."""
    if ref.endswith((".yaml", ".yml")) or os.sep in ref:
        if not Path(ref).exists():
            raise ManifestError(f"{ref}: no such manifest file")
        return load(ref)
    known = discover(root)
    if ref in known:
        return load(known[ref])
    matches = sorted(n for n in known if n.endswith(ref))
    if len(matches) == 1:
        return load(known[matches[0]])
    if len(matches) > 1:
        raise ManifestError(f"{ref!r} is ambiguous: {', '.join(matches)}; name one of them")
    close = difflib.get_close_matches(ref, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(known))}"
    raise ManifestError(f"unknown manifest {ref!r}{hint}")
