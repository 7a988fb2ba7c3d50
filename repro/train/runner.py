"""A run's life: one RunSpec settled in the store, trained, finished, and its outcome.

The store (:func:`repro.store.settle.settle`) puts the run's folder in order and says what to do: a
finished run is skipped, a finished twin under another manifest is reused, a run another process trains
is skipped as busy (saying who); otherwise its data is opened and checked (one-line errors before
anything is written), its lock is held, and it starts, or resumes from its newest good checkpoint
(model, optimizer, scheduler, data position, RNG and recurrent state, training measurements all
restored). Training is :mod:`repro.train.fit` (stops, divergence and failures included), its end
:mod:`repro.train.finish`. Under torchrun or srun (``repro.train.distributed``) rank 0 does all of this;
the other ranks train with it from the checkpoint it names and write nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import lightning.pytorch as pl

from repro import cpu_isa
from repro.config.manifest import Manifest
from repro.config.spec import RunSpec
from repro.errors import UserError
from repro.progress import say
from repro.store.runs import RunDir, State
from repro.store.settle import settle
from repro.train import distributed, environment, fit
from repro.train.rundata import open_data


@dataclass
class Outcome:
    spec: RunSpec
    status: str  # finished | skipped | reused | failed | busy (another process trains it)
    summary: dict


def run_spec(
    spec: RunSpec,
    manifest: Manifest,
    root: Path,
    *,
    devices: int = 1,
    num_nodes: int = 1,
    wandb_mode: str = "disabled",
    callbacks: Sequence[pl.Callback] = (),
    echo: Callable[[str], None] = say,
    isa: str | None = None,
    precision: str | None = None,
    eval_targets: int | None = None,
) -> Outcome:
    """Train ``spec`` into ``root`` (or resume it, or skip it when finished). ``isa``: the instruction set
    (repro/cpu_isa.py); default: the one the stored run recorded, else ``REPRO_CPU_ISA``'s. ``precision``:
    what ``train.precision: auto`` resolves to (repro/train/environment.py); default: the one the stored run
    recorded, else this machine's. ``eval_targets``: the final evaluation scores each split's first so
    many targets (a ``--max-steps`` run's); None: all of them."""
    world = distributed.world(devices, num_nodes)
    check_processes(spec, manifest, world)
    distributed.start(world)
    run = RunDir(root, spec.manifest, spec.run_id)
    state = run.state()  # read once here, when the run's turn comes: another process may have moved it
    stored = recorded_environment(state)
    if isa is None and not state.finished:
        isa = cpu_isa.for_run(stored)
    with environment.pinned(spec, isa, precision or environment.recorded_precision(stored)) as precision:
        if not world.leads:
            return _follow(spec, manifest, run, world, callbacks, precision)
        return _lead(spec, manifest, run, state, world, wandb_mode, callbacks, echo, precision, eval_targets)


def recorded_environment(state: State) -> dict | None:
    """The ``environment`` an unfinished stored run recorded when it started (None: finished, none, or a
    summary that does not read, which settling the run reports)."""
    return None if state.finished else (state.summary or {}).get("environment")


def settle_isa(states: Iterable[tuple[str, State]]) -> None:
    """Before a session's first run (``states``: each run's id and state, in the session's order): apply
    the instruction set of the first unfinished run that recorded one, so that the new runs after it
    follow it instead of refusing it (cpu_isa.for_run)."""
    for run_id, state in states:
        if (stored := cpu_isa.recorded(recorded_environment(state))) is not None:
            cpu_isa.apply(stored, f"run {run_id}")
            return


def _lead(spec, manifest, run, state, world, wandb_mode, callbacks, echo, precision, eval_targets) -> Outcome:
    """Rank 0 (or the only process): settle the run, then train it, telling the other ranks what to do."""
    prepare = partial(open_data, spec, manifest)  # bad data or sizes: refused before anything is written
    with distributed.leading(world) as tell, settle(run, spec.record(None), prepare, echo, state) as got:
        if not got.trains:
            tell(("done", got.action))
            return Outcome(spec, got.action, got.summary)
        trained = fit.train(spec, precision, manifest, run, got, world, wandb_mode, callbacks, echo, tell, eval_targets)
        return Outcome(spec, *trained)


def check_processes(spec: RunSpec, manifest: Manifest, world: distributed.World) -> None:
    """Each process takes an equal share of the batch's streams."""
    if spec.train.batch_size % world.processes:
        raise UserError(
            f"{manifest.path}: train.batch_size: {spec.train.batch_size} cannot be shared by {world.processes} "
            f"processes (--devices {world.devices} x --num-nodes {world.nodes}); allowed: a multiple of "
            f"{world.processes}"
        )


def _follow(
    spec: RunSpec,
    manifest: Manifest,
    run: RunDir,
    world: distributed.World,
    callbacks: Sequence[pl.Callback],
    precision: str,
) -> Outcome:
    """A rank other than 0: train when rank 0 says so, from the checkpoint it names; write nothing."""
    what, word = distributed.follow(world)
    if what == "done":
        return Outcome(spec, word, {})
    data = open_data(spec, manifest)  # after rank 0's: a `file` dataset is prepared once
    return Outcome(spec, fit.follow(spec, precision, run, data, world, callbacks, word), {})
