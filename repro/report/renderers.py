"""Renderers: one function per paper table/figure, reading only stored runs, writing files.

Renderers are plain files: every ``*.py`` at the top of the repository's ``analysis/`` folder
(``$REPRO_ANALYSIS`` if set) whose name does not start with ``_`` (:func:`repro.config.renderer_names.shipped`),
so a new figure is a new file there, and the files a manifest names
under ``analysis`` (its own renderers, beside it). A file registers its functions with
:func:`renderer` when it is loaded. A renderer is registered under the name a manifest lists in ``renders``, with the ``reference`` keys
(and their types) it reads from the manifest, and is called once per scale with a :class:`Context`:
a tidy table of the runs (one row per run of the manifest's current resolution, in grid order; the
resolved spec flattened into dotted columns such as ``model.span.limit``; the summary's keys as
columns), the results root, and the tables of the manifest's ``parts``. It returns the files it wrote
with their captions. Every figure names its scale and dataset. Renderers never load a model or train
(Figure 2 of the adaptive span draws the mechanism's own ``repro.models.span.soft_mask``); the arrays of a
trained model that figures need are computed once after training by ``repro.train.figure_arrays``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import math
import os
import posix
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from repro.claims import verdict as verdicts
from repro.config import capped as capping
from repro.config import renderer_names
from repro.config.keys import matching
from repro.config.manifest import Manifest, ManifestError, analysis_root
from repro.files import atomic
from repro.grammar import language as claims
from repro.registry import Registry
from repro.store.runs import RunDir, results_root

Renderer = Callable[["Context"], list[tuple[Path, str]]]
# figures carry no timestamp (and no version that a library update would move): a report regenerated
# from the same store is the same bytes
PNG_METADATA = {"Software": None}
PDF_METADATA = {"CreationDate": None, "Creator": None, "Producer": None}


@dataclass(frozen=True)
class Registered:
    """A renderer as its ``@renderer(...)`` declares it: its function, the file that defines it, the
    summary keys (and run files) and the manifest's reference keys (with their types) it reads."""

    name: str
    fn: Renderer
    file: Path
    reads: tuple[str, ...]
    reference: dict[str, type | tuple[type, ...]]


# Every renderer of the renderer files loaded so far. Which files there are is a folder, not a list here:
# analysis/ (or $REPRO_ANALYSIS) and a manifest's own, so that a figure is a new file and a user's manifest
# brings its own; what they declare is also read from their source (repro.config.renderer_names) without running
# them, so that only `repro report` and `repro validate --renderers` run renderer code.
RENDERERS: Registry[Registered] = Registry("renderer")
SPEC_SECTIONS = ("data.", "model.", "train.", "eval.")  # a claim's selections of spec keys, not metrics


@dataclass
class Context:
    manifest: Manifest
    runs: pd.DataFrame  # tidy: this manifest's current runs at this scale, one row per grid cell (seed means)
    scale: str
    root: Path  # the results root
    parts: dict[str, pd.DataFrame] = field(default_factory=dict)  # manifest.parts -> their tidy tables
    replicates: pd.DataFrame | None = None  # every seed's run of those cells (None: one per cell, as runs)
    judged: list[tuple[str, str, verdicts.Verdict]] = field(default_factory=list)  # see judge()
    capped: int | None = None  # the runs are the manifest's capped at this many steps (``--max-steps``)

    def judge(self, claim_id: str, text: str, holds: bool | None, detail: str) -> str:
        """A verdict a renderer reaches from what it computed (a check the claim grammar cannot write): stored
        as a :class:`repro.claims.verdict.Verdict` on the seed means, so the report lists and counts it with
        the manifest's claims; with one seed it is *indicative*, with ``holds`` None *not evaluable*.
        Returns the verdict's words, for the renderer's caption."""
        seeds = int(self.runs["seeds"].min()) if "seeds" in self.runs and not self.runs.empty else 1
        if holds is None:
            verdict = verdicts.Verdict(verdicts.NOT_EVALUABLE, detail)
        elif seeds == 1:
            verdict = verdicts.Verdict(verdicts.INDICATIVE, detail, 1, holds=holds)
        else:
            status = verdicts.REPRODUCED if holds else verdicts.NOT_REPRODUCED
            verdict = verdicts.Verdict(status, f"{detail}; on the means of {seeds} seeds", seeds)
        self.judged.append((claim_id, text, verdict))
        return f"{verdict.status} ({claim_id}, judged by this renderer)"

    def seeds_of(self, row: pd.Series) -> list[str]:
        """The run ids of every seed of ``row``'s cell (its own first)."""
        if self.replicates is None or self.replicates.empty:
            return [row["run_id"]]
        keys = [k for k in self.manifest.grid_for(self.scale) if k in self.replicates]
        same = self.replicates[keys].astype(str).eq(pd.Series({k: str(row[k]) for k in keys})).all(axis=1)
        found = list(self.replicates.loc[same, "run_id"])
        return [row["run_id"], *[r for r in found if r != row["run_id"]]]

    @property
    def out_dir(self) -> Path:
        return self.root / "reports"

    def run_dir(self, run_id: str, manifest: str | None = None) -> RunDir:
        return RunDir(self.root, manifest or self.manifest.name, run_id)

    def reference(self, key: str, default: Any = None) -> Any:
        return self.manifest.reference.get(key, default)

    def reference_for(self, cell: dict[str, Any]) -> dict[str, Any]:
        return reference_for(self.manifest, cell)

    def figure_path(self, stem: str, suffix: str = "png") -> Path:
        path = self.out_dir / "figures" / f"{self.manifest.name}-{stem}-{self.scale}{self._capped}.{suffix}"
        for folder in (self.out_dir, path.parent):  # never written through a planted link
            atomic.refuse_link(folder)
        atomic.make_dirs(path.parent)
        return path

    def save_figure(self, fig: Any, stem: str) -> Path:
        """Save a matplotlib figure as PNG (shown in reports) and PDF; close it; return the PNG path."""
        import matplotlib.pyplot as plt  # here, as in pyplot()

        path = self.figure_path(stem)
        fig.tight_layout()
        try:
            for target, dpi, metadata in (
                (path, 130, PNG_METADATA),
                (self.figure_path(stem, "pdf"), None, PDF_METADATA),
            ):
                with atomic.replacing(target) as fh:  # a reader (or a kill) never meets half a figure
                    fig.savefig(fh, format=target.suffix[1:], dpi=dpi or "figure", metadata=metadata)
        finally:
            plt.close(fig)
        return path

    def write_table(
        self, stem: str, frame: pd.DataFrame, title: str, notes: Any = (), label: str | None = None
    ) -> Path:
        """``tables/<manifest>-<stem>-<scale>.md`` (title, scale and data named, table, notes) and ``.csv``;
        returns the markdown path, which the report inlines."""
        base = self.out_dir / "tables" / f"{self.manifest.name}-{stem}-{self.scale}{self._capped}"
        for folder in (self.out_dir, base.parent):
            atomic.refuse_link(folder)
        lines = [f"# {title}", "", label or self.label, "", markdown_table(frame), ""] + [f"- {n}" for n in notes]
        # appended, never Path.with_suffix: a derived manifest's name has dots (as-ablate-ramp.train.steps_30)
        atomic.write_text(table_csv(base), frame.to_csv(index=False))
        atomic.write_text(base.with_name(base.name + ".md"), "\n".join(lines) + "\n")
        return base.with_name(base.name + ".md")

    def title(self, what: str) -> str:
        """A figure's title: ``what``, the overrides of a derived manifest, then the scale and data, and
        at a trained scale other than the paper's the banner that these are not the paper's numbers."""
        derived = [f"{k}={v}" for k, v in self.manifest.set.items()] + [
            f"{k}={','.join(map(str, v))}" for k, v in self.manifest.sweep.items()
        ]
        banner = " — NOT the paper's numbers" if self.scale not in ("paper", "none") else ""
        return f"{what}" + (f" [{' '.join(derived)}]" if derived else "") + f"\n{self.label}{banner}"

    @property
    def label(self) -> str:
        """What every figure states: scale and dataset(s)."""
        if self.scale == "none":
            return "analytic: no training, no data"
        capped = f" ({capping.label(self.capped).upper()})" if self.capped else ""
        return f"scale: {self.scale}{capped} | data: {datasets(self.runs)}"

    @property
    def bits_per(self) -> str:
        """The unit these runs' bits are per, from their datasets (``dataset_unit``: ``bits per byte`` on
        linux-doc, ``bits per char`` on text8); ``bits per symbol`` where none is recorded."""
        return bits_unit(self.runs)

    @property
    def _capped(self) -> str:
        """A capped report's files apart from the manifest's own: ``-capped<N>`` after the scale."""
        return f"-capped{self.capped}" if self.capped else ""


def table_csv(path: Path) -> Path:
    """The ``.csv`` beside a table ``path`` (``.md``, or the name without its extension)."""
    name = path.name.removesuffix(".md")
    return path.with_name(name + ".csv")


def reference_for(manifest: Any, cell: dict[str, Any]) -> dict[str, Any]:
    """The paper's values for a grid cell: the first ``reference.runs`` entry whose ``match`` the cell
    satisfies (keys may be dotted suffixes; an empty match fits every run), without ``match``."""
    for entry in manifest.reference.get("runs") or []:
        match = entry.get("match") or {}
        if all(any(str(v) == str(cell[c]) for c in matching(k, cell)) for k, v in match.items()):
            return {k: v for k, v in entry.items() if k != "match"}
    return {}


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend, with the suite's seaborn theme (imported here:
    every ``repro`` command imports this package, only the figures need these, which take a second)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    return plt


def legend(ax: Any, **options: Any) -> None:
    """A legend of the axes' labelled lines, none when nothing is labelled (no runs' curves to draw, say):
    matplotlib would warn "No artists with labels found"."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**options)


def format_value(value: Any, digits: int = 4) -> str:
    """A table cell: blank for missing, thousands separators for counts, ``digits`` significant digits."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        if float(value).is_integer() and abs(value) >= 1000:
            return f"{int(value):,}"
        return f"{value:.{digits}g}" if abs(value) < 1e6 else f"{value:.3e}"
    return str(value)


def markdown_table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(no rows)"
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(format_value(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def study_main(argv: list[str] | None, doc: str, name: str, study: Callable[[Path], str]) -> None:
    """The command line of a study of ``analysis/studies/`` (``doc``: its docstring, whose first paragraph
    describes it): ``--results`` the store it reads, ``--out`` the markdown file it writes with what
    ``study(root)`` returns, by default ``<results>/studies/<name>.md``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--results", help="results root (default: $REPRO_RESULTS or results/)")
    parser.add_argument("--out", help=f"the markdown file (default: <results>/studies/{name}.md)")
    args = parser.parse_args(argv)
    root = results_root(args.results)
    out = Path(args.out) if args.out else root / "studies" / f"{name}.md"
    atomic.write_text(out, study(root))
    print(f"wrote {out}")


def datasets(runs: pd.DataFrame) -> str:
    """The datasets of these runs, for labels ("?" when none is recorded).

    Each names its source version where one is recorded (a Debian package's, e.g. "linux-doc 6.1.192-3")
    and says "unverified" when its sources did not match the pins.
    """
    labels = set()
    for _, run in runs.iterrows() if "dataset" in runs else ():
        if pd.isna(run["dataset"]):
            continue
        version, verified = run.get("dataset_version"), run.get("dataset_verified")
        label = str(run["dataset"]) + (f" {version}" if isinstance(version, str) else "")
        labels.add(label + (" (unverified)" if isinstance(verified, (bool, np.bool_)) and not verified else ""))
    return ", ".join(sorted(labels)) or "?"


def bits_unit(runs: pd.DataFrame) -> str:
    """``bits per <unit>`` of the runs' datasets (several: ``bits per byte / char``), ``bits per symbol`` when
    none records one."""
    units = runs["dataset_unit"].dropna().astype(str) if "dataset_unit" in runs else pd.Series(dtype=str)
    return "bits per " + (" / ".join(sorted(set(units))) or "symbol")


def spread(row: Any, key: str) -> float:
    """The standard deviation over the seeds of ``row``'s cell of the summary key ``key`` (the context's
    ``<key> sd`` column, repro.claims.select.seed_means); NaN when the cell has one seed, which matplotlib draws as no bar."""
    try:
        return float(row.get(f"{key} sd"))
    except (TypeError, ValueError):
        return math.nan


def error_bars(ax: Any, x: Any, y: Any, yerr: Any = None, xerr: Any = None, **style: Any) -> None:
    """The seeds' spread (``spread``) as bars around points or bars already drawn; nothing when every cell
    has one seed. The data stay on their own labelled artists: the bars carry no label."""
    given = [np.asarray(e, dtype=float) for e in (yerr, xerr) if e is not None]
    if not any(np.isfinite(e).any() for e in given):
        return
    style = {"color": "0.2", "capsize": 3, "lw": 1} | style
    ax.errorbar(x, y, yerr=yerr, xerr=xerr, fmt="none", **style)


def error_extent(y: Any, yerr: Any = None) -> tuple[float, float]:
    """The lowest ``y - yerr`` and the highest ``y + yerr`` (a missing error counts 0): what an axis must
    hold so that no error bar is clipped."""
    y = np.asarray(y, dtype=float)
    err = np.nan_to_num(np.asarray(yerr, dtype=float), nan=0.0) if yerr is not None else np.zeros_like(y)
    return float(np.nanmin(y - err)), float(np.nanmax(y + err))


def mark_single_seeds(ax: Any, x: Any, y: Any, seeds: Any) -> None:
    """``n=1`` above each bar drawn from one seed (no error bar to read its spread from)."""
    for xi, yi, n in zip(x, y, seeds):
        if n == 1 and yi == yi:
            ax.annotate("n=1", (xi, yi), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=6)


def without_blank_spread(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without its ``... sd`` columns that no row fills (every cell on one seed)."""
    return frame.drop(columns=[c for c in frame if str(c).endswith(" sd") and frame[c].isna().all()])


def finished_runs(runs: pd.DataFrame) -> pd.DataFrame:
    if runs.empty or "status" not in runs:
        return runs.iloc[0:0]
    return runs[runs["status"] == "finished"]


def renderer(
    name: str, reads: tuple[str, ...] = (), reference: dict[str, type | tuple[type, ...]] | None = None
) -> Callable[[Renderer], Renderer]:
    """Register a renderer; ``reads``: the summary keys (``file:key`` for other run files) it reads;
    ``reference``: the manifest's reference keys it reads, with their types."""

    def register(fn: Renderer) -> Renderer:
        here = Path(fn.__code__.co_filename).resolve()
        if name in RENDERERS and RENDERERS[name].file != here:
            raise ManifestError(f"{here}: renderer {name!r} is already defined in {RENDERERS[name].file}")
        RENDERERS.add(Registered(name, fn, here, tuple(reads), dict(reference or {})), replace=True)
        return fn

    return register


def load(path: Path) -> ModuleType:
    """A renderer file, loaded once (its renderers registered); ``analysis.<stem>`` for the shipped ones."""
    path = Path(path).resolve()
    shipped = path.parent == analysis_root().resolve()
    name = f"analysis.{path.stem}" if shipped else f"analysis.user_{hashlib.sha1(bytes(path)).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with _no_exit():
            spec.loader.exec_module(module)
    except (Exception, SystemExit, KeyboardInterrupt) as err:
        del sys.modules[name]
        if isinstance(err, ManifestError) or (shipped and isinstance(err, Exception)):
            raise
        first = (str(err).strip().splitlines() or [""])[0]
        raise ManifestError(f"{path}: the renderer file does not load: {type(err).__name__}: {first}") from None
    return module


class _Exit(SystemExit):
    """``os._exit`` called by a renderer file while it loads."""


@contextlib.contextmanager
def _no_exit() -> Iterator[None]:
    """While a renderer file loads, ``os._exit`` raises (it would end the command with any status it
    chose, skipping what the command still had to check and say): the load fails in one line instead."""

    def refuse(status: int) -> None:
        raise _Exit(f"os._exit({status}) called while loading")

    saved = os._exit, posix._exit
    os._exit = posix._exit = refuse
    try:
        yield
    finally:
        os._exit, posix._exit = saved


def registry(files: Iterable[Path] = ()) -> dict[str, Renderer]:
    """The shipped renderers and those of ``files`` (a manifest's own), by name."""
    wanted = {p.resolve() for p in [*renderer_names.shipped(), *files]}
    for path in sorted(wanted):
        load(path)
    return {name: r.fn for name, r in RENDERERS.items() if r.file in wanted}


def describe() -> list[dict[str, Any]]:
    """Every renderer: name, what it draws (its docstring's first paragraph), the summary keys and the
    reference keys it reads."""
    return [
        {
            "name": name,
            "draws": " ".join((fn.__doc__ or "").strip().split("\n\n")[0].split()),
            "reads": list(RENDERERS[name].reads),
            "reference": {k: renderer_names.type_name(tp) for k, tp in RENDERERS[name].reference.items()},
        }
        for name, fn in sorted(registry().items())
    ]


def check_loaded(manifest: Manifest) -> Manifest:
    """``manifest`` checked (:func:`repro.config.renderer_names.check`) against the renderers its files register
    when loaded, the shipped ones and its own: ``repro report`` (which runs them to draw) and ``repro
    validate --renderers``; every other command reads their source only (:func:`repro.config.renderer_names.check_declared`)."""
    return renderer_names.check(manifest, {name: RENDERERS[name].reference for name in registry(manifest.analysis)})


def claim_metrics(manifest: Manifest, checks: list[claims.Check]) -> list[str]:
    """The stored metrics that ``checks`` (of ``manifest``'s claims judged at a scale) compare and none of its
    renderers reads (``reads``; ``name<N>`` stands for ``name`` followed by digits), in the claims' order:
    the report's table of runs shows them beside its usual columns, so that every number a verdict rests on
    is on the page, also where a manifest reuses a renderer written for other claims. Spec keys
    (``model.span.ramp``) and the sanity checks' ``learned[]`` are not metrics here."""
    known = registry(manifest.analysis)
    read = [key for name in manifest.renders if name in known for key in RENDERERS[name].reads]
    patterns = [re.compile(re.escape(key).replace(re.escape("<N>"), r"\d+") + "$") for key in read]
    out: list[str] = []
    for check in checks:
        if claims.is_sanity(check):
            continue
        for metric, _ in check.selections:
            if metric.startswith(SPEC_SECTIONS) or any(p.match(metric) for p in patterns) or metric in out:
                continue
            out.append(metric)
    return out


def render_all(ctx: Context) -> list[tuple[Path, str]]:
    known = registry(ctx.manifest.analysis)
    files: list[tuple[Path, str]] = []
    for name in ctx.manifest.renders:
        files += known[name](ctx)
    return files
