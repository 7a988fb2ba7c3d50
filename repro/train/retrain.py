"""``repro run M --run-id ID --retrain-checkpoint``: the checkpoint of a finished run, trained again.

Checkpoints are not committed, so a cloned store has finished runs that ``repro sample`` cannot load.
The run is trained again from its spec under a scratch results root (``<results>/.retrain/<id>``, W&B
off), and its checkpoint is kept only if the retrained run reproduces the stored bits (the same run id
gives the same bits); the stored run's files are never rewritten. A mismatch keeps the scratch run for
inspection and fails.
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
from repro.store import checkpoints
from repro.store.runs import RunDir
from repro.train import environment
from repro.train.runner import Outcome, run_spec

SCRATCH = ".retrain"
SCORES = ("valid_bits", "test_bits")
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


def checkpoint(spec: RunSpec, manifest: Manifest, root: Path, echo: Callable[[str], None] = say) -> Outcome:
    """Retrain a finished run that lacks the checkpoint of its last step (none stored, or damaged) and keep
    the checkpoint if the bits reproduce; any other run trains (or is skipped) as ``repro run`` would."""
    run = RunDir(root, spec.manifest, spec.run_id)
    if not run.finished or checkpoints.at_step(run.checkpoints, spec.train.steps, spec.run_id)[0] is not None:
        if run.finished:
            echo(f"  {spec.run_id} has its checkpoint: nothing to retrain")
        return run_spec(spec, manifest, root, echo=echo)
    stored = run.summary()
    with run.lock() as lock:
        if not lock.held:
            echo(f"  skipped: run {spec.run_id} is being trained by {lock.holder}")
            return Outcome(spec, "busy", {})
        scratch = root / SCRATCH / spec.run_id
        echo(f"  retraining {spec.run_id} for its checkpoint (under {scratch}; W&B off)")
        again = reexecute(spec, manifest, stored, scratch, echo=echo)
        if again.status != "finished":
            raise StoreError(f"run {spec.run_id}: the retraining {again.status}; the stored run is unchanged")
        compared = {k: (stored[k], again.summary.get(k)) for k in SCORES if stored.get(k) is not None}
        off = {k: v for k, v in compared.items() if v[1] is None or abs(v[0] - v[1]) > TOLERANCE}
        if off:
            shown = ", ".join(f"{k} {new} (stored {old})" for k, (old, new) in off.items())
            raise StoreError(
                f"run {spec.run_id}: retrained, it gives {shown}: not the stored bits, so its checkpoint is not "
                f"kept (the retrained run stays under {scratch}; the stored run is unchanged)"
            )
        retrained = RunDir(scratch, spec.manifest, spec.run_id)
        if run.checkpoints.exists():
            shutil.rmtree(run.checkpoints)  # none of its last step: damaged or earlier ones at most
        retrained.checkpoints.rename(run.checkpoints)
        shutil.rmtree(scratch)
        with contextlib.suppress(OSError):  # the scratch root, when no other retraining uses it
            scratch.parent.rmdir()
    shown = ", ".join(f"{k} {new:.6f} = stored {old:.6f}" for k, (old, new) in compared.items()) or "no split scored"
    echo(f"  checkpoint retrained and kept ({shown})")
    return Outcome(spec, "finished", stored)
