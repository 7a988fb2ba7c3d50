"""A plan: the runs a selection trains, as data, made once from one look at the store.

Each run is its manifest, its spec and its :class:`~repro.store.runs.State` (the summary read once, when
the plan is made) and, when the plan trains into another root than the shipped store, the finished run of
its id stored there (:class:`Shipped`, read then too: what the run is held beside when it ends); the plan
adds what a capped run scores, the timings its ETA comes from and what its seeds can decide (the power
note). ``repro run`` prints a plan and hands it to :mod:`repro.session`; a
launched job makes the plan of its one run with the same :func:`resolve`, so that it finds the very run
its parent submitted. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from repro import data
from repro.config.capped import with_max_steps
from repro.config.keys import names
from repro.config.manifest import Manifest
from repro.config.spec import RunSpec
from repro.plan import eta, filters
from repro.progress import say
from repro.store.runs import RunDir, State, results_root


@dataclass(frozen=True)
class Shipped:
    """The finished run of a planned run's id in the shipped store (``results_root(None)``) when the plan
    trains into another root: where it lies, its spec and its summary, as read when the plan was made."""

    path: Path
    spec: dict[str, Any]
    summary: dict[str, Any]


@dataclass(frozen=True)
class Planned:
    """One run of a plan: its manifest, its spec, its state in the store when the plan was made and, when it
    was unfinished then, the run of its id that the shipped store holds finished (None: none, or the plan
    trains into the shipped store)."""

    manifest: Manifest
    spec: RunSpec
    state: State
    shipped: Shipped | None = None


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
    state read now (and, unfinished, the shipped store's run of its id); ``echo`` gets, as they are found,
    the manifests that train nothing and the cells their overrides leave out."""
    for m in manifests:
        if m.base is None:
            echo(f"{m.name} trains nothing; `repro report {m.command}` draws it")
    trains = [m for m in manifests if m.base is not None]
    for m in trains:
        for cell, why in m.left_out(scale) if scale in m.scale_names() else []:
            if _picked(cell, only):
                echo(f"left out, its overrides make this cell invalid: {why}")
    specs, caps = resolve(trains, scale, seeds, only, max_steps, run_id, full_eval)
    runs = []
    for m, s in specs:
        state = RunDir(root, m.name, s.run_id).state()
        runs.append(Planned(m, s, state, None if state.finished else _shipped(root, m.name, s.run_id)))
    return Plan(root, scale, seeds, trains, runs, caps, eta.Timings(eta.default_roots(root)))


def _shipped(root: Path, manifest: str, run_id: str) -> Shipped | None:
    """The finished run of ``run_id`` in the shipped store, when that is not ``root``'s (None: none, it does
    not read, or it is this very run)."""
    twin = RunDir(results_root(None), manifest, run_id)
    if twin.path.resolve() == RunDir(root, manifest, run_id).path.resolve():
        return None
    try:
        state = twin.state()
    except OSError:
        return None
    if not state.finished or state.spec is None or state.summary is None:  # finished: both were read
        return None
    return Shipped(twin.path, state.spec, state.summary)


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
