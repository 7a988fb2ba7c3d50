"""Renderers: one function per paper table/figure, reading only stored runs, writing files.

A renderer is registered under the name a manifest lists in ``renders`` and is called once per
scale with a :class:`Context`; it returns the files it wrote with their captions. Every figure names
its scale and dataset. Renderers never import models or train.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from repro.store import RunDir

# Modules holding renderers; each registers its functions with @renderer on import.
MODULES = ["repro.analysis.suite", "repro.analysis.sparse_transformer", "repro.analysis.adaptive_span"]

Renderer = Callable[["Context"], list[tuple[Path, str]]]
_REGISTRY: dict[str, Renderer] = {}


@dataclass
class Context:
    manifest: Any  # repro.manifest.Manifest
    runs: pd.DataFrame  # the store's rows of this manifest at this scale
    scale: str
    out_dir: Path  # results/reports

    def run_dir(self, run_id: str) -> RunDir:
        return RunDir(self.out_dir.parent, self.manifest.name, run_id)

    def figure_path(self, stem: str, suffix: str = "png") -> Path:
        path = self.out_dir / "figures" / f"{self.manifest.name}-{stem}-{self.scale}.{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def label(self) -> str:
        """What every figure states: scale and dataset(s)."""
        if self.scale == "none":
            return "analytic: no training, no data"
        data = ", ".join(sorted(set(self.runs.get("dataset", pd.Series(dtype=str)).dropna().astype(str))))
        return f"scale: {self.scale} | data: {data or '?'}"


def renderer(name: str) -> Callable[[Renderer], Renderer]:
    def register(fn: Renderer) -> Renderer:
        _REGISTRY[name] = fn
        return fn

    return register


def registry() -> dict[str, Renderer]:
    for module in MODULES:
        importlib.import_module(module)
    return _REGISTRY


def render_all(manifest: Any, runs: pd.DataFrame, scale: str, out_dir: Path) -> list[tuple[Path, str]]:
    known = registry()
    files: list[tuple[Path, str]] = []
    for name in manifest.renders:
        files += known[name](Context(manifest, runs, scale, out_dir))
    return files
