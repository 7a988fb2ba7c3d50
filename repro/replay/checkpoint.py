"""``repro run M --run-id ID --retrain-checkpoint``: the checkpoint of a finished run, trained again.

Checkpoints are not committed, so a cloned store has finished runs that ``repro sample`` cannot load.
The run is trained again from its spec under a scratch results root (``<results>/.retrain/<id>``, W&B
off), and its checkpoint is put beside the stored run only if the retrained run reproduces the stored bits
(the same run id gives the same bits); the stored run's files are never rewritten. A retraining that does
not reproduce them stays under the scratch root, where ``repro sample`` loads it: the expected outcome
when the run could not give its bits here (uncommitted code, another CPU vendor: repro.replay.samebits),
a failure otherwise.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path

from repro import cpu_isa
from repro.config.manifest import Manifest
from repro.config.spec import RunSpec
from repro.errors import StoreError
from repro.progress import say
from repro.replay import samebits
from repro.store import checkpoints
from repro.store.runs import RunDir
from repro.train import environment
from repro.train.runner import Outcome, run_spec

SCRATCH = ".retrain"
TOLERANCE = 1e-6  # bits; the same spec on the same code gives the same numbers


def reexecute(
    spec: RunSpec, manifest: Manifest, stored: dict, scratch: Path, echo: Callable[[str], None] = say
) -> Outcome:
    """Train a stored run again from its first step under the results root ``scratch`` (emptied first;
    W&B off), in the environment it recorded: its instruction set (``stored["environment"]``, read by
    :func:`repro.cpu_isa.recorded`), its threads (the spec's ``train.threads``) and precision (the spec's
    ``train.precision``; ``auto``: what the run recorded it resolved to). Same spec, code and environment give the stored bits (docs/reproducibility.md);
    the caller compares. A process that already runs the other instruction set refuses, one line."""
    shutil.rmtree(scratch, ignore_errors=True)  # a re-execution that was killed starts afresh
    recorded = stored.get("environment")
    return run_spec(
        spec,
        manifest,
        scratch,
        echo=echo,
        isa=cpu_isa.recorded(recorded),
        precision=environment.recorded_precision(recorded),
    )


def copy_of(run: RunDir) -> RunDir:
    """Where the retraining of ``run`` lives: ``<results>/.retrain/<id>/runs/<manifest>/<id>``."""
    root = run.path.parent.parent.parent
    return RunDir(root / SCRATCH / run.run_id, run.path.parent.name, run.run_id)


def checkpoint(spec: RunSpec, manifest: Manifest, root: Path, echo: Callable[[str], None] = say) -> Outcome:
    """Retrain a finished run that lacks the checkpoint of its last step (none stored, or damaged) and keep
    the checkpoint beside it if the bits reproduce; any other run trains (or is skipped) as ``repro run``
    would. A retraining not expected to give the stored bits for a reason known before it trains
    (:func:`repro.replay.samebits.reasons`: uncommitted code, another CPU vendor, ...) is kept apart under
    ``<results>/.retrain/<id>`` for ``repro sample`` (status ``kept apart``); one that differs for no such
    reason fails, kept apart too. A finished copy there is not trained again."""
    run = RunDir(root, spec.manifest, spec.run_id)
    if not run.finished or checkpoints.at_step(run.checkpoints, spec.train.steps, spec.run_id)[0] is not None:
        if run.finished:
            echo(f"  {spec.run_id} has its checkpoint: nothing to retrain")
        return run_spec(spec, manifest, root, echo=echo)
    stored = run.summary()
    copy = copy_of(run)
    foreseen = samebits.reasons(run.spec(), stored)
    with run.lock() as lock:
        if not lock.held:
            echo(f"  skipped: run {spec.run_id} is being trained by {lock.holder}")
            return Outcome(spec, "busy", {})
        scratch = copy.path.parent.parent.parent
        if copy.finished and copy.last_checkpoint is not None:
            echo(f"  {spec.run_id} was retrained before, under {scratch}: not trained again")
        else:
            why = (
                f": it is not expected to give the stored bits ({'; '.join(foreseen)}), kept apart if it does not"
                if foreseen
                else ""
            )
            echo(f"  retraining {spec.run_id} for its checkpoint (under {scratch}; W&B off){why}")
            again = reexecute(spec, manifest, stored, scratch, echo=echo)
            if again.status != "finished":
                raise StoreError(f"run {spec.run_id}: the retraining {again.status}; the stored run is unchanged")
        retrained = copy.summary()
        off = samebits.differences(stored, retrained, TOLERANCE)
        if off:
            return _kept_apart(spec, run, copy, off, foreseen, retrained, echo)
        if run.checkpoints.exists():
            shutil.rmtree(run.checkpoints)  # none of its last step: damaged or earlier ones at most
        copy.checkpoints.rename(run.checkpoints)
        shutil.rmtree(scratch)
        with contextlib.suppress(OSError):  # the scratch root, when no other retraining uses it
            scratch.parent.rmdir()
    compared = samebits.scores(stored)
    shown = ", ".join(f"{k} {retrained[k]:.6f} = stored {v:.6f}" for k, v in compared.items()) or "no split scored"
    echo(f"  checkpoint retrained and kept ({shown})")
    return Outcome(spec, "finished", stored)


def _kept_apart(spec, run, copy, off, foreseen, retrained, echo) -> Outcome:
    """A retraining that did not give the stored bits: its copy stays under ``.retrain`` for ``repro sample``
    and the stored run is unchanged; foreseen, that is the outcome (``kept apart``), else a failure."""
    said = (
        f"run {spec.run_id}: retrained, it gives {samebits.shown(off)}: not the stored bits, so its checkpoint is "
        f"not put beside the stored run, which is unchanged; "
    )
    sample = f"the retrained copy is kept: `repro sample {copy.path}` samples it"
    if foreseen:
        echo(f"  {said}as foreseen: {'; '.join(foreseen)}; {sample}")
        return Outcome(spec, "kept apart", retrained)
    why = samebits.unexplained(run.spec(), run.summary(), str(copy.spec().get("code_version")))
    raise StoreError(f"{said}{why}; {sample}")
