"""Training a settled run: the module, the Trainer, the fit, and the status it ends with.

Rank 0 (:func:`train`) writes the spec and a ``running`` summary, fits from the checkpoint the store
named, has :mod:`repro.train.finish` score the trained model and marks the run ``finished``; SIGTERM/SIGINT
checkpoint at the next step boundary and mark it ``interrupted``; a diverging run is marked ``failed`` and
keeps its last good checkpoint; any other exception after training started marks it ``failed`` with the
message. The other ranks (:func:`follow`) fit with it from the checkpoint rank 0 names and write nothing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import lightning.pytorch as pl

from repro.config.manifest import Manifest
from repro.config.spec import RunSpec
from repro.errors import RunFailed, StoreError
from repro.store import checkpoints
from repro.store.checkpoints import StoreCheckpointIO
from repro.store.provenance import code_version
from repro.store.runs import FAILED, FINISHED, INTERRUPTED, RUNNING, RunDir, refresh_index
from repro.store.settle import Settled
from repro.track.loggers import StoreLogger, finish_wandb, resend_missing, wandb_logger
from repro.train import distributed, environment, finish, memory, quiet, signals
from repro.train.callbacks import BoundaryCheckpoint, Divergence, ProgressLines, TrainingMeter
from repro.train.module import LMModule
from repro.train.resume import warn_repartition
from repro.train.rundata import RunData
from repro.train.selection import callbacks as selection_callbacks


def train(
    spec: RunSpec,
    precision: str,
    manifest: Manifest,
    run: RunDir,
    got: Settled[RunData],
    world: distributed.World,
    wandb_mode: str,
    callbacks: Sequence[pl.Callback],
    echo: Callable[[str], None],
    tell: Callable[[Any], None],
    eval_targets: int | None = None,
) -> tuple[str, dict]:
    """Rank 0: train the settled run (from ``got.checkpoint``, when it resumes) in ``precision`` (its
    ``train.precision`` resolved: repro.train.environment.pinned) and finish it, telling the other ranks
    where to start; its status (finished or failed) and summary. ``eval_targets``: the final evaluation
    scores each split's first so many targets (:func:`repro.train.finish.scores`)."""
    data = got.prepared
    module = _module(spec, data)
    run.write_spec(spec.record(code_version()))
    store_logger = StoreLogger(run)
    wb = wandb_logger(wandb_mode, spec, manifest.paper, manifest.renders, run)
    params = sum(p.numel() for p in module.model.parameters())
    earlier = {k: v for k, v in got.summary.items() if k != "error"}  # as settling read it, under the lock
    run.write_summary(
        {
            **earlier,
            **opening(spec, data, precision),
            "train_tokens": int(data.train.size),
            "params": params,
            "wandb_run_id": wb.experiment.id if wb is not None else None,
        }
    )
    resume = str(got.checkpoint) if got.checkpoint is not None else None
    if got.checkpoint is not None:
        echo(f"  resuming {spec.run_id} from step {got.step}")
        if wb is not None and (resent := resend_missing(wb, run, got.step)):
            echo(f"  W&B lacked {resent} row(s) the store holds (lost with the killed process): sent again")
        warn_repartition(got.checkpoint, world, echo)
    if not sys.stderr.isatty():  # a log or a pipe: Lightning's bar is off, print lines instead
        callbacks = [
            *callbacks,
            ProgressLines(spec.train.steps, max(spec.train.log_every, spec.train.steps // 20), echo=echo),
        ]
    loggers = [store_logger] + ([wb] if wb is not None else [])
    trainer = _trainer(spec, precision, run, store_logger, loggers, world, callbacks)
    tell(("train", resume))
    stage = (
        f"a training step (train.batch_size = {spec.train.batch_size} streams of data.block = {spec.data.block} tokens)"
    )
    try:
        diverged = _fit(trainer, module, data, resume, world.strategy == "ddp_spawn")
        stage = f"the final evaluation (eval.batch_size = {spec.eval.batch_size} windows of data.block = {spec.data.block} tokens)"
        if diverged is None:
            final = finish.scores(spec, module, trainer, run, data, world, eval_targets)
    except signals.Interrupted as err:
        err.detail = _stopped(run, wb, err.exit_status)
        raise
    except Exception as err:  # under ddp_spawn a worker's exception arrives wrapped: its last line says what
        if memory.out_of_memory(err):
            _failed(run, store_logger, wb, f"out of memory in {stage}")
            raise RunFailed(
                f"run {spec.run_id} of {spec.manifest}: out of memory in {stage}; marked failed, its last "
                "checkpoint kept: lower the batch size (or the block), or free memory, then `repro run` resumes it"
            ) from None
        _failed(run, store_logger, wb, str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__)
        raise
    if diverged is not None:
        _failed(run, store_logger, wb, str(diverged))
        echo(f"  run {spec.run_id} diverged: {diverged}; marked failed, last good checkpoint kept")
        return "failed", run.summary()
    return "finished", _finished(spec, run, wb, final)


def follow(
    spec: RunSpec,
    precision: str,
    run: RunDir,
    data: RunData,
    world: distributed.World,
    callbacks: Sequence[pl.Callback],
    resume: str | None,
) -> str:
    """A rank other than 0: train from the checkpoint rank 0 named (``resume``), writing nothing; finished
    or failed."""
    module = _module(spec, data)
    store_logger = StoreLogger(run)  # rank-zero-only: writes nothing here
    trainer = _trainer(spec, precision, run, store_logger, [store_logger], world, callbacks)
    try:
        diverged = _fit(trainer, module, data, resume, forward=False)
    except signals.Interrupted as err:
        err.detail = f"rank {world.rank} of run {spec.run_id} stopped with rank 0, which keeps the checkpoint"
        raise
    return "failed" if diverged else "finished"


def _module(spec: RunSpec, data: RunData) -> LMModule:
    pl.seed_everything(spec.train.seed, verbose=False)
    return LMModule(
        spec, data.vocab.size, data.info.shape, valid=data.splits["valid"] if spec.train.val_every else None
    )


def _finished(spec: RunSpec, run: RunDir, wb, final: dict[str, Any]) -> dict[str, Any]:
    """Mark the run finished with ``final`` (:func:`repro.train.finish.scores`) and refresh its manifest
    folder's index; its summary."""
    summary = run.update_summary(status=FINISHED, **final)
    refresh_index(run.path.parent.parent.parent, spec.manifest)
    if wb is not None:
        finish_wandb(wb, run)
    return summary


def _failed(run: RunDir, store_logger: StoreLogger, wb, message: str) -> None:
    """Mark a run failed with ``message`` (a full disk may refuse this too; its own error says why)."""
    with contextlib.suppress(StoreError):
        store_logger.flush()
        run.update_summary(status=FAILED, error=message)
    if wb is not None:
        wb.experiment.finish(exit_code=1)


def _fit(trainer: pl.Trainer, module: LMModule, data: RunData, resume: str | None, forward: bool) -> Divergence | None:
    """Train (from ``resume``); the divergence that stopped it, if one did (every rank finds the same);
    raise :class:`signals.Interrupted` if a signal stopped it. ``forward``: pass a signal on to the
    spawned workers."""
    with signals.deferring(forward=forward):
        trainer.fit(module, datamodule=data.batches, ckpt_path=resume, weights_only=True)
    stopped = signals.requested() or int(trainer.callback_metrics.get(BoundaryCheckpoint.STOPPED, 0))
    if stopped:
        raise signals.Interrupted(stopped)
    return Divergence.found(trainer.callback_metrics)


def _stopped(run: RunDir, wb, exit_status: int) -> str:
    """Mark an interrupted run; the line that says where it stopped."""
    with contextlib.suppress(StoreError):
        run.update_summary(status=INTERRUPTED)
    if wb is not None:
        wb.experiment.finish(exit_code=exit_status)
    kept = checkpoints.latest(run.checkpoints, echo=lambda line: None)
    where = f"checkpoint of step {kept[1]} kept" if kept else "no checkpoint yet"
    return f"run {run.run_id} of {run.path.parent.name} marked interrupted, {where}; `repro run` resumes it"


def _trainer(
    spec: RunSpec,
    precision: str,
    run: RunDir,
    store_logger: StoreLogger,
    loggers: list,
    world: distributed.World,
    callbacks: Sequence[pl.Callback],
) -> pl.Trainer:
    quiet.install()
    return pl.Trainer(
        accelerator="auto",
        devices=world.devices,
        num_nodes=world.nodes,
        strategy=world.strategy,
        precision=precision,
        max_steps=spec.train.steps,
        max_epochs=-1,
        logger=loggers,
        # best.ckpt is written before last.ckpt at a boundary: a resume never misses a validation it passed
        callbacks=[
            *selection_callbacks(spec, run.checkpoints),
            BoundaryCheckpoint(run.checkpoints, spec.train.checkpoint_every, store_logger),
            TrainingMeter(processes=world.devices),  # the ranks on this machine count as the run's own
            *callbacks,
        ],
        plugins=[StoreCheckpointIO(), world.environment],
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        enable_model_summary=False,
        log_every_n_steps=spec.train.log_every,
        enable_progress_bar=sys.stderr.isatty(),
        default_root_dir=str(run.path),
        use_distributed_sampler=False,
    )


def opening(spec: RunSpec, data, precision: str) -> dict:
    """The summary a run starts with, running: what it is, on which data, in which environment (a trained
    run's and a scored one's, repro.pretrained, alike)."""
    return {
        "status": RUNNING,
        "manifest": spec.manifest,
        "run_id": spec.run_id,
        "scale": spec.scale,
        "cell": spec.cell,
        "family": spec.family,
        "dataset": spec.data.label,
        "dataset_version": data.source_version,
        "dataset_verified": data.verified,
        "dataset_unit": data.vocab.unit,
        "environment": environment.describe(precision),
    }
