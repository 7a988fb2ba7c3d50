"""Settling a run folder before it trains: one operation that puts in order what the store holds and says
what to do with the run.

In order: a run whose summary says ``finished`` is skipped; a finished run of the same computation under
another manifest or id (a *twin*: the same spec, or one that computes the same numbers and stores all
this run would, :func:`repro.store.computation.provides`) is looked for; unless there is one, ``prepare`` runs (the trainer opens and
checks its data there: bad input fails before anything is written); the run's lock is taken (a run another
process trains is *busy*, saying who); links where the run's files belong are refused; what killed writers
left is removed; a summary or spec that does not read is set aside (the summary starts afresh, the spec is
rewritten); a run finished by another process meanwhile is skipped; a twin is adopted (a damaged one,
its bits missing or not numbers, its metrics.csv gone, or a FIFO in place of it or of its analysis.npz,
is passed over, named); otherwise the run starts, or resumes from its newest good checkpoint, its metrics
cut to that checkpoint's step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from repro.identity import identity
from repro.store import checkpoints
from repro.store.computation import computation, provides
from repro.store.runs import FINISHED, CorruptFile, LeftOut, RunDir, State, data_fault, listing
from repro.store.usable import damage

T = TypeVar("T")

SKIPPED, REUSED, BUSY, START, RESUME = "skipped", "reused", "busy", "start", "resume"


@dataclass(frozen=True)
class Settled(Generic[T]):
    """What to do with a run: ``skipped`` (finished: ``summary`` is its), ``reused`` (a twin adopted:
    ``summary`` is the adopted one), ``busy`` (``holder`` trains it), or ``start``/``resume`` (the lock is
    held; ``summary`` is the run's as it stands under the lock; ``checkpoint`` and ``step`` say where a
    resume starts; ``prepared`` is what ``prepare`` gave)."""

    action: str
    summary: dict[str, Any] = field(default_factory=dict)
    holder: str | None = None
    prepared: T | None = None
    checkpoint: Path | None = None
    step: int = 0

    @property
    def trains(self) -> bool:
        return self.action in (START, RESUME)


@contextlib.contextmanager
def settle(
    run: RunDir,
    record: dict[str, Any],
    prepare: Callable[[], T],
    echo: Callable[[str], None],
    state: State | None = None,
) -> Iterator[Settled[T]]:
    """``with settle(run, spec.record(None), prepare, echo) as got:`` the :class:`Settled` of ``run``, its
    lock held inside the block when it trains (or was adopted). ``record``: the run's spec.yaml record (its
    id, manifest, scale, cell and resolved sections), which an adoption stores; ``state``: the run's state
    as the caller just read it (None: read here). Under the lock the run is read once more: another
    process may have finished it since."""
    state = state or run.state()
    if state.finished:
        yield Settled(SKIPPED, state.summary or {})
        return
    twin = finished_twin(run.path.parent.parent.parent, record, echo)
    prepared = prepare() if twin is None else None  # before any write
    with run.lock() as lock:
        if not lock.held:
            echo(f"  skipped: run {run.run_id} is being trained by {lock.holder}")
            yield Settled(BUSY, holder=lock.holder)
            return
        now = _repair(run, echo)
        if now.finished:  # finished by another process since we looked
            yield Settled(SKIPPED, now.summary or {})
            return
        if twin is not None:
            same = "same spec" if twin.run_id == run.run_id else "same computation"
            echo(f"  reused: {twin.path.parent.name}/{twin.run_id} ({same}), not retrained")
            yield Settled(REUSED, run.adopt(twin, record))
            return
        found = checkpoints.latest(run.checkpoints, echo, run_id=run.run_id)
        run.cut_metrics(found[1] if found else 0, echo)  # what a killed run logged beyond its checkpoint goes
        if found is None:
            yield Settled(START, now.summary or {}, prepared=prepared)
        else:
            yield Settled(RESUME, now.summary or {}, prepared=prepared, checkpoint=found[0], step=found[1])


def _repair(run: RunDir, echo: Callable[[str], None]) -> State:
    """Under the lock: refuse links, remove temp files, set aside a summary or spec that does not read;
    the run's state as it then stands (a summary set aside reads as none)."""
    run.refuse_links()
    removed = run.clean_temps()
    if removed:
        echo(f"  removed {len(removed)} temporary file(s) a killed run left")
    summary: dict[str, Any] = {}
    try:
        if (run.path / "summary.json").exists():
            summary = run.summary()
    except CorruptFile as err:  # the summary starts afresh
        echo(f"  {err}: the run is redone")
        run.write_summary({})
    try:
        spec_reads = (run.path / "spec.yaml").exists() and bool(run.spec())
    except CorruptFile as err:  # the spec is rewritten
        echo(f"  {err}: the run is redone")
        spec_reads = False
    return State(summary, summary.get("status") == FINISHED and spec_reads)


def finished_twin(root: Path, record: dict[str, Any], echo: Callable[[str], None]) -> RunDir | None:
    """A finished run stored under another manifest or id that gives what a run of ``record`` would: first
    one of the same id (its stored spec hashing to its folder's id and equal to ``record`` section by
    section, not only by id), then one of the same computation that :func:`provides` it (found through
    the store's index, or among the runs its scan left out for a FIFO in place of a data file). Copies
    (runs that were themselves reused) are passed over for their originals, and damaged runs (no regular
    metrics.csv or analysis.npz; :func:`repro.store.usable.damage`: bits missing or not numbers, no
    metrics.csv) with a line to ``echo`` naming the file and why."""
    run_id, manifest = record["run_id"], record["manifest"]
    for summary in sorted((root / "runs").glob(f"*/{run_id}/summary.json")):
        other = RunDir(root, summary.parent.parent.name, run_id)
        if other.path.parent.name == manifest or not other.finished or "reused_from" in other.summary():
            continue
        if identity(other.spec()) == identity(record) and _usable(other, echo):
            return other
    key = computation(record)
    found, left = listing(root)
    twins = [
        RunDir(root, row["manifest"], row["run_id"])
        for row, _ in found
        if row.get("computation") == key
        and row.get("status") == "finished"
        and not isinstance(row.get("reused_from"), str)
    ]
    twins += _left_out(root, left, key)
    for other in twins:
        if other.run_id == run_id:
            continue  # the same id: only as a twin of the same spec, above
        if other.finished and provides(other.spec(), record) and _usable(other, echo):
            return other
    return None


def _left_out(root: Path, left: list[LeftOut], key: str) -> list[RunDir]:
    """The finished originals of the computation ``key`` among the runs the store's scan left out for what
    stands in place of their metrics.csv or analysis.npz (a FIFO: :func:`repro.store.runs.data_fault`;
    their spec and summary read): twins that :func:`_usable` names, never adopts."""
    runs = [RunDir(root, out.folder.parent.name, out.folder.name) for out in left if out.folder is not None]
    return [
        run for run in runs if run.finished and computation(run.spec()) == key and "reused_from" not in run.summary()
    ]


def _usable(twin: RunDir, echo: Callable[[str], None]) -> bool:
    """Whether a finished twin's numbers can be adopted; a damaged one is named to ``echo``: no regular file
    as its metrics.csv or analysis.npz (never opened: a FIFO would hang the copy), or numbers that cannot be
    used (:func:`repro.store.usable.damage`)."""
    why = data_fault(twin.path) or damage(twin, twin.spec(), twin.summary())
    if why:
        echo(f"  not reused: {why}")
    return why is None
