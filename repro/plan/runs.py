"""A plan: the runs a selection trains, as data, made once from one look at the store.

Each run is its manifest, its spec and its :class:`~repro.store.runs.State` (the summary read once, when
the plan is made); the plan adds what a capped run scores, the timings its ETA comes from and what its
seeds can decide (the power note). ``repro run`` prints a plan and hands it to :mod:`repro.session`; a
launched job makes the plan of its one run with the same :func:`resolve`, so that it finds the very run
its parent submitted. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from repro import data
from repro.config import lookup
from repro.config.capped import with_max_steps
from repro.config.keys import names
from repro.config.manifest import Manifest
from repro.config.spec import RunSpec
from repro.plan import eta, filters
from repro.progress import say
from repro.store.runs import RunDir, State, sources


@dataclass(frozen=True)
class Planned:
    """One run of a plan: its manifest, its spec, and its state in the store when the plan was made."""

    manifest: Manifest
    spec: RunSpec
    state: State


@dataclass
class Plan:
    """The runs a selection trains into ``root`` at ``scale``, in order (``manifests``: those that train;
    ``caps``: run id -> the targets of each split a capped run scores; ``timings``: the stored runs its
    ETA comes from)."""

    root: Path
    scale: str
    seeds: int | None
    manifests: list[Manifest]
    runs: list[Planned]
    caps: dict[str, int]
    timings: eta.Timings

    @property
    def unfinished(self) -> list[Planned]:
        return [p for p in self.runs if not p.state.finished]

    def eta(self, runs: Sequence[Planned], parallel: int = 1, elapsed: Mapping[str, float] | None = None) -> str:
        """The ETA of ``runs`` (:func:`repro.plan.eta.plan`) from the timings as they stand."""
        return eta.plan([p.spec for p in runs], self.timings, self.caps, parallel, elapsed)

    @cached_property
    def power(self) -> str:
        """``; <what the seeds can decide>`` when runs to train (not pretrained weights) are left and a
        manifest has claims at the scale (repro.claims.power.power_note), else ""."""
        from repro.claims.power import power_note  # scipy, when it is asked

        if not any(p.spec.train.weights is None for p in self.unfinished):
            return ""
        judged = [m for m in self.manifests if any(c.scales is None or self.scale in c.scales for c in m.claims)]
        return "; " + power_note(self.seeds or max(m.replicates(self.scale) for m in judged)) if judged else ""

    def table(self) -> Iterator[str]:
        """A line per run, as ``--dry-run`` shows it: its id, manifest, cell and state in the store, and,
        unfinished, what its data lacks (:func:`repro.data.missing`)."""
        for p in self.runs:
            why = data.missing(p.spec.data.name, **p.spec.data.options()) if not p.state.finished else None
            cell = p.spec.cell_name if p.spec.cell else "-"
            yield f"{p.spec.run_id}  {p.manifest.name}  {cell}  [{p.state.status}{'; ' + why if why else ''}]"

    @property
    def scored(self) -> str:
        """What the capped runs' evaluation scores, in words."""
        sizes = sorted(set(self.caps.values()))
        if not sizes:
            return "score every target (none of these runs is longer than the cap)"
        shown = " or ".join(f"{n:,}" for n in sizes)
        return (
            f"score each split's first {shown} targets (train.val_tokens, the quick validation's prefix); "
            "--full-eval scores every target"
        )


def stored(root: Path) -> lookup.Stored:
    """What the results root knows of manifests outside experiments/ (by the names they were run with)."""
    return lookup.Stored(sources(root), f"{root}/sources")


def make(
    manifests: list[Manifest],
    root: Path,
    scale: str,
    *,
    seeds: int | None = None,
    only: Sequence[str] = (),
    max_steps: int | None = None,
    run_id: str | None = None,
    full_eval: bool = False,
    echo: Callable[[str], None] = say,
) -> Plan:
    """The plan of ``manifests`` at ``scale`` into ``root`` (:func:`resolve` picks the runs), each run's
    state read now; ``echo`` gets, as they are found, the manifests that train nothing and the cells
    their overrides leave out."""
    for m in manifests:
        if m.base is None:
            echo(f"{m.name} trains nothing; `repro report {m.command}` draws it")
    trains = [m for m in manifests if m.base is not None]
    for m in trains:
        for cell, why in m.left_out(scale) if scale in m.scale_names() else []:
            if _picked(cell, only):
                echo(f"left out, its overrides make this cell invalid: {why}")
    specs, caps = resolve(trains, scale, seeds, only, max_steps, run_id, full_eval)
    runs = [Planned(m, s, RunDir(root, m.name, s.run_id).state()) for m, s in specs]
    return Plan(root, scale, seeds, trains, runs, caps, eta.Timings(eta.default_roots(root)))


def resolve(
    manifests: list[Manifest],
    scale: str,
    seeds: int | None,
    only: Sequence[str],
    max_steps: int | None,
    run_id: str | None = None,
    full_eval: bool = False,
) -> tuple[list[tuple[Manifest, RunSpec]], dict[str, int]]:
    """The (manifest, spec) pairs a selection trains: each manifest's runs at ``scale`` (``--seeds``),
    kept by ``--only``, capped by ``--max-steps`` (a capped run has an id of its own), narrowed to
    ``run_id`` last; and, unless ``full_eval``, the runs the cap shortened, each with the targets of each
    split its evaluation scores (``train.val_tokens``: docs/evaluation.md)."""
    specs, caps = [], {}
    for m in manifests:
        for s in filters.select(m.expand(scale, seeds=seeds), only):
            short = with_max_steps(s, max_steps)
            if short is not s and not full_eval:
                caps[short.run_id] = short.train.val_tokens
            if run_id is None or short.run_id == run_id:
                specs.append((m, short))
    return specs, caps


def _picked(cell: dict, only: Sequence[str]) -> bool:
    """Whether ``--only`` keeps this cell (each KEY=VALUE: a key equal to KEY or ending in .KEY)."""
    pairs = [item.partition("=")[::2] for item in only]
    return all(any(names(key, k) and str(v) == value for k, v in cell.items()) for key, value in pairs)
