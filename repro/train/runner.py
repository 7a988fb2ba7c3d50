"""One RunSpec -> Lightning fit -> full-split evaluation -> the run store (+ W&B).

A run whose summary says ``finished`` is skipped. Otherwise its data is opened and checked (one-line
errors before anything is written), its lock taken (a run another process trains is skipped, saying
who), and it starts, or resumes from its newest good checkpoint (model, optimizer, scheduler, data
position, RNG and recurrent state, training measurements all restored). SIGTERM/SIGINT checkpoint at
the next step boundary and mark it ``interrupted``; a diverging run is marked ``failed`` and keeps its
last good checkpoint; any other exception after training started marks it ``failed`` with the message.
Under torchrun or srun (``repro.train.distributed``) rank 0 does all of this; the other ranks train with it
from the checkpoint it names and write nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from repro import cpu_isa
from repro import data as datasets
from repro.config.manifest import Manifest
from repro.config.spec import RunSpec, from_record
from repro.errors import RunFailed, StoreError, UserError
from repro.models.base import LanguageModel
from repro.progress import say
from repro.store import checkpoints
from repro.store.checkpoints import StoreCheckpointIO
from repro.store.provenance import code_version
from repro.store.runs import FAILED, FINISHED, INTERRUPTED, RUNNING, CorruptFile, RunDir, finished_twin, refresh_index
from repro.track.loggers import StoreLogger, finish_wandb, resend_missing, wandb_logger
from repro.train import distributed, environment, memory, quiet, signals, throughput
from repro.train.evaluation import evaluate, unigram_bits
from repro.train.module import (
    BoundaryCheckpoint,
    Divergence,
    LMDataModule,
    LMModule,
    ProgressLines,
    TrainingMeter,
    saved_ranks,
)
from repro.train.probes import figure_arrays
from repro.train.selection import callbacks as selection_callbacks
from repro.train.selection import load_selected


@dataclass
class Outcome:
    spec: RunSpec
    status: str  # finished | skipped | reused | failed | busy (another process trains it)
    summary: dict


def select(specs: list[RunSpec], only: Sequence[str]) -> list[RunSpec]:
    """Keep the runs whose grid cell matches every ``KEY=VALUE`` (a key may be a dotted suffix)."""
    for item in only:
        key, eq, value = item.partition("=")
        if not eq:
            raise UserError(f"--only {item!r}: expected KEY=VALUE")
        keys = {k for s in specs for k in s.cell if k == key or k.endswith("." + key)}
        if len(keys) != 1:
            known = sorted({k for s in specs for k in s.cell})
            raise UserError(
                f"--only {item!r}: {key!r} matches {len(keys)} grid keys; grid keys: {', '.join(known) or 'none'}"
            )
        (full,) = keys
        kept = [s for s in specs if str(s.cell[full]) == value]
        if not kept:
            values = list(dict.fromkeys(str(s.cell[full]) for s in specs))
            raise UserError(
                f"--only {item!r}: no run has {full}={value}; {full} takes: {', '.join(values)}"
                + ("" if len(only) == 1 else " (after the other --only filters)")
            )
        specs = kept
    return specs


def with_max_steps(spec: RunSpec, max_steps: int | None) -> RunSpec:
    """Cap the training length (a different run: the id changes with the spec)."""
    if max_steps is not None and max_steps < 1:
        raise UserError(f"--max-steps {max_steps}: allowed: a positive number of steps")
    if max_steps is None or max_steps >= spec.train.steps:
        return spec
    return replace(spec, train=spec.train.model_copy(update={"steps": max_steps}))


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
) -> Outcome:
    """Train ``spec`` into ``root`` (or resume it, or skip it when finished). ``isa``: the instruction set
    (repro/cpu_isa.py); default: the one the stored run recorded, else ``REPRO_CPU_ISA``'s."""
    world = distributed.world(devices, num_nodes)
    check_processes(spec, manifest, world)
    distributed.start(world)
    run = RunDir(root, spec.manifest, spec.run_id)
    if isa is None and not run.finished:
        isa = cpu_isa.for_run(recorded_environment(run))
    with environment.pinned(spec, isa):
        if not world.leads:
            return _follow(spec, manifest, run, world, callbacks)
        return _lead(spec, manifest, root, run, world, wandb_mode, callbacks, echo)


def recorded_environment(run: RunDir) -> dict | None:
    """The ``environment`` a stored run recorded when it started (None: none, or a summary that does not
    read, which the run's settling reports)."""
    try:
        return run.summary().get("environment")
    except CorruptFile:
        return None


def settle_isa(root: Path, specs: Sequence[RunSpec]) -> None:
    """Before a session's first run: apply the instruction set of the first unfinished run that recorded
    one, so that the new runs after it follow it instead of refusing it (cpu_isa.for_run)."""
    for spec in specs:
        run = RunDir(root, spec.manifest, spec.run_id)
        if not run.finished and (stored := cpu_isa.recorded(recorded_environment(run))) is not None:
            cpu_isa.apply(stored, f"run {spec.run_id}")
            return


def _lead(spec, manifest, root, run, world, wandb_mode, callbacks, echo) -> Outcome:
    """Rank 0 (or the only process): settle the run, then train it, telling the other ranks what to do."""
    with distributed.leading(world) as tell, contextlib.ExitStack() as held:
        outcome, data = _settle(spec, manifest, root, run, held, echo)
        if outcome is not None:
            tell(("done", outcome.status))
            return outcome
        return _train(spec, manifest, run, data, world, wandb_mode, callbacks, echo, tell)


def check_processes(spec: RunSpec, manifest: Manifest, world: distributed.World) -> None:
    """Each process takes an equal share of the batch's streams."""
    if spec.train.batch_size % world.processes:
        raise UserError(
            f"{manifest.path}: train.batch_size: {spec.train.batch_size} cannot be shared by {world.processes} "
            f"processes (--devices {world.devices} x --num-nodes {world.nodes}); allowed: a multiple of "
            f"{world.processes}"
        )


def _settle(
    spec: RunSpec, manifest: Manifest, root: Path, run: RunDir, held: contextlib.ExitStack, echo
) -> tuple[Outcome | None, RunData | None]:
    """Rank 0 before training: the outcome of a run that is not to be trained (finished, trained by
    another process, a finished twin's results reused), else its data, with the run's lock taken into
    ``held``."""
    if run.finished:
        return Outcome(spec, "skipped", run.summary()), None
    twin = finished_twin(root, spec.manifest, spec.resolved())
    data = None if twin is not None else open_data(spec, manifest)  # bad data or sizes: before any write
    lock = held.enter_context(run.lock())
    if not lock.held:
        echo(f"  skipped: run {spec.run_id} is being trained by {lock.holder}")
        return Outcome(spec, "busy", {}), None
    run.refuse_links()
    removed = run.clean_temps()
    if removed:
        echo(f"  removed {len(removed)} temporary file(s) a killed run left")
    for read, name in ((run.summary, "summary.json"), (run.spec, "spec.yaml")):
        try:
            if (run.path / name).exists():
                read()
        except CorruptFile as err:  # the summary starts afresh, the spec is rewritten
            echo(f"  {err}: the run is redone")
            if name == "summary.json":
                run.write_summary({})
    if run.finished:  # finished by another process since we looked
        return Outcome(spec, "skipped", run.summary()), None
    if twin is not None:
        echo(f"  same spec already finished under {twin.path.parent.name}: reused, not retrained")
        return Outcome(spec, "reused", run.adopt(twin, spec.manifest, spec.cell)), None
    return None, data


def _follow(
    spec: RunSpec, manifest: Manifest, run: RunDir, world: distributed.World, callbacks: Sequence[pl.Callback]
) -> Outcome:
    """A rank other than 0: train when rank 0 says so, from the checkpoint it names; write nothing."""
    what, word = distributed.follow(world)
    if what == "done":
        return Outcome(spec, word, {})
    data = open_data(spec, manifest)  # after rank 0's: a `file` dataset is prepared once
    module = _module(spec, data)
    store_logger = StoreLogger(run)  # rank-zero-only: writes nothing here
    trainer = _trainer(spec, run, store_logger, [store_logger], world, callbacks)
    try:
        diverged = _fit(trainer, module, data, word, forward=False)
    except signals.Interrupted as err:
        err.detail = f"rank {world.rank} of run {spec.run_id} stopped with rank 0, which keeps the checkpoint"
        raise
    return Outcome(spec, "failed" if diverged else "finished", {})


@dataclass
class RunData:
    """What a run reads, opened and checked before anything is written."""

    train: np.ndarray
    vocab: Any
    info: Any
    splits: dict[str, np.ndarray]  # the evaluated splits (valid always: analyses read it)
    batches: LMDataModule
    source_version: str | None  # the dataset's source version and whether it was verified
    verified: bool


def open_data(spec: RunSpec, manifest: Manifest) -> RunData:
    """Open every split the run needs and check that its sizes fit the spec (UserError otherwise)."""
    options = spec.data.options()
    train, vocab = datasets.open_split(spec.data.name, "train", **options)
    names = {*spec.eval.splits, "valid", *(["test"] if spec.eval.context_sweep else [])}
    splits = {name: datasets.open_split(spec.data.name, name, **options)[0] for name in sorted(names)}
    block, where = spec.data.block, f"{manifest.path}: data.block: {spec.data.block}"
    for name, array in {"train": train, **splits}.items():
        if array.ndim == 2 and array.shape[1] != block:
            raise UserError(f"{where} differs from the sequence length of {spec.data.name}; allowed: {array.shape[1]}")
        room = (len(array) - 1) // (spec.train.batch_size if name == "train" else 1)
        streams = (len(array) - 1) // block  # how many training streams of a block the split holds
        if array.ndim == 1 and name == "train" and room < block and streams >= 1:
            raise UserError(
                f"{manifest.path}: train.batch_size: {spec.train.batch_size} streams of data.block = {block} "
                f"tokens do not fit the train split of {spec.data.name} ({len(array) - 1:,} targets); "
                f"allowed: at most {streams:,}"
            )
        if array.ndim == 1 and room < block:
            what = (
                f"{spec.train.batch_size} training streams of {room:,} tokens"
                if name == "train"
                else f"its {room:,} targets"
            )
            raise UserError(
                f"{where} is longer than the {name} split of {spec.data.name} ({what}); allowed: at most {room:,}"
            )
    try:
        batches = LMDataModule(spec, train, vocab.size)
    except UserError as err:
        raise UserError(f"{manifest.path}: {err}") from None
    source_version, verified = datasets.provenance(spec.data.name, **options)
    return RunData(train, vocab, datasets.dataset_info(spec.data.name), splits, batches, source_version, verified)


def _module(spec: RunSpec, data: RunData) -> LMModule:
    pl.seed_everything(spec.train.seed, verbose=False)
    return LMModule(
        spec, data.vocab.size, data.info.shape, valid=data.splits["valid"] if spec.train.val_every else None
    )


def _train(
    spec: RunSpec,
    manifest: Manifest,
    run: RunDir,
    data: RunData,
    world: distributed.World,
    wandb_mode: str,
    callbacks: Sequence[pl.Callback],
    echo: Callable[[str], None],
    tell: Callable[[Any], None],
) -> Outcome:
    module = _module(spec, data)
    resume = checkpoints.latest(run.checkpoints, echo, run_id=spec.run_id)
    run.cut_metrics(resume[1] if resume else 0, echo)  # what a killed run logged beyond its checkpoint goes
    run.write_spec(spec.record(code_version()))
    store_logger = StoreLogger(run)
    wb = wandb_logger(wandb_mode, spec, manifest.paper, manifest.renders, run)
    params = sum(p.numel() for p in module.model.parameters())
    earlier = {k: v for k, v in run.summary().items() if k != "error"}
    run.write_summary(
        {
            **earlier,
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
            "train_tokens": int(data.train.size),
            "params": params,
            "environment": environment.describe(spec),
            "wandb_run_id": wb.experiment.id if wb is not None else None,
        }
    )
    if resume is not None:
        echo(f"  resuming {spec.run_id} from step {resume[1]}")
        if wb is not None and (resent := resend_missing(wb, run, resume[1])):
            echo(f"  W&B lacked {resent} row(s) the store holds (lost with the killed process): sent again")
        _warn_repartition(resume[0], world, echo)
    if not sys.stderr.isatty():  # a log or a pipe: Lightning's bar is off, print lines instead
        callbacks = [
            *callbacks,
            ProgressLines(spec.train.steps, max(spec.train.log_every, spec.train.steps // 20), echo=echo),
        ]
    trainer = _trainer(spec, run, store_logger, [store_logger] + ([wb] if wb is not None else []), world, callbacks)
    tell(("train", str(resume[0]) if resume else None))
    stage = (
        f"a training step (train.batch_size = {spec.train.batch_size} streams of data.block = {spec.data.block} tokens)"
    )
    try:
        diverged = _fit(trainer, module, data, str(resume[0]) if resume else None, world.strategy == "ddp_spawn")
        stage = f"the final evaluation (eval.batch_size = {spec.eval.batch_size} windows of data.block = {spec.data.block} tokens)"
        if diverged is None:
            selected = load_selected(spec, run.checkpoints, module.model)
            if selected["selected"] == "best_valid":
                module.checkpoint_stats = None  # the statistics of the weights scored, not of the last ones
            started = time.perf_counter()
            scores = _evaluate_and_analyse(spec, module, trainer, run, data)
            # eval_seconds: what `repro run`'s ETA adds per run beside the training steps
            final = {
                "steps": spec.train.steps,
                **selected,
                **scores,
                "eval_seconds": round(time.perf_counter() - started, 2),
            }
            final.update(_throughput(spec, final, trainer, run, world))
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
        return Outcome(spec, "failed", run.summary())
    summary = run.update_summary(status=FINISHED, **final)
    refresh_index(run.path.parent.parent.parent, spec.manifest)
    if wb is not None:
        finish_wandb(wb, run)
    return Outcome(spec, "finished", summary)


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


def _warn_repartition(path: Path, world: distributed.World, echo: Callable[[str], None]) -> None:
    """One line when the checkpoint was written by another number of processes."""
    saved = saved_ranks(checkpoints.load(path, mmap=True))
    if len(saved) == world.processes:
        return
    caches = any(rank["state"] is not None for rank in saved)
    echo(
        f"  warning: the checkpoint was written by {len(saved)} process(es), this run has {world.processes}: "
        + ("the recurrent caches start empty (the streams' partition changed) and " if caches else "")
        + "the random streams are dealt anew, so the run no longer equals an uninterrupted one"
    )


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
        precision=spec.train.precision,
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


def _throughput(spec: RunSpec, final: dict, trainer: pl.Trainer, run: RunDir, world: distributed.World) -> dict:
    """Achieved model FLOP/s and MFU against the device's peak, the FLOPs convention, and the load the
    machine carried over training (repro.train.throughput, docs/throughput.md)."""
    metrics = trainer.callback_metrics
    sampled = (TrainingMeter.LOAD_MEAN, TrainingMeter.LOAD_MAX, TrainingMeter.OTHERS_MEAN, TrainingMeter.OTHERS_MAX)
    load = {key: float(metrics[key]) for key in sampled if key in metrics}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return {
        **load,
        "cpus": os.cpu_count(),
        "ran_alone": throughput.ran_alone(load.get(TrainingMeter.OTHERS_MAX)),
        **throughput.summary_fields(
            run.path.parent.parent.parent,
            device,
            spec.train.precision,
            final.get("flops_per_token"),
            spec.train.batch_size * spec.data.block,
            final.get(TrainingMeter.SECONDS),
            world.processes if device == "cuda" else 1,
        ),
    }


def _evaluate_and_analyse(spec: RunSpec, module: LMModule, trainer: pl.Trainer, run: RunDir, data: RunData) -> dict:
    """Summary numbers of a trained model: training time, speed and memory (kept with the checkpoints,
    so a resumed run reports its whole training), FLOPs, its statistics as of the final checkpoint, bits
    on every split (and at every swept context), the unigram level of the valid split; stores the family's
    figure arrays (analysis.npz)."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = module.model.to(device)
    metrics = trainer.callback_metrics
    final: dict[str, Any] = {
        key: float(metrics[key]) if key in metrics else None
        for key in (TrainingMeter.TRAIN_SECONDS, TrainingMeter.SECONDS, TrainingMeter.PEAK)
    }
    if final[TrainingMeter.PEAK] is not None:
        final[TrainingMeter.PEAK] = int(final[TrainingMeter.PEAK])
    final.update({"flops_per_token": float(model.flops_per_token()), **(module.checkpoint_stats or model.stats())})
    final["unigram_bits"] = unigram_bits(data.train, data.splits["valid"], data.vocab.size)
    for name in spec.eval.splits:
        shown = name if trainer.is_global_zero else None  # rank 0's lines
        result = evaluate(model, data.splits[name], spec, device, data.vocab.size, progress=shown)
        final.update(
            {
                f"{name}_bits": result["bits"],
                f"{name}_targets": result["targets"],
                "eval_procedure": result["procedure"],
                "eval_min_context": result["min_context"],
            }
        )
    for context in spec.eval.context_sweep:
        swept = replace(spec, eval=spec.eval.model_copy(update={"min_context": context}))
        final[f"test_bits_ctx{context}"] = evaluate(model, data.splits["test"], swept, device, data.vocab.size)["bits"]
    # arrays behind figures that need the trained model (renderers never load it)
    run.write_arrays("analysis.npz", figure_arrays(spec.family, model, data.splits["valid"], data.vocab))
    return final


def load_trained(run: RunDir, device: torch.device | str = "cpu") -> tuple[LanguageModel, RunSpec, object, object]:
    """The model of a stored run with the weights it scored (last or best), its spec, vocabulary and dataset info."""
    found = checkpoints.latest(run.checkpoints, run_id=run.run_id)
    if found is None:
        stored = run.spec()
        name = stored.get("manifest", run.path.parent.name)
        raise UserError(
            f"{run.path}: no checkpoint (checkpoints are not committed); `repro run {name} --scale "
            f"{stored.get('scale')} --run-id {run.run_id} --retrain-checkpoint` trains it again, checks that it "
            "reproduces the stored bits and keeps its checkpoint"
        )
    spec = from_record(run.spec())
    _, vocab = datasets.open_split(spec.data.name, "valid", **spec.data.options())
    info = datasets.dataset_info(spec.data.name)
    module = LMModule(spec, vocab.size, info.shape)
    module.load_state_dict(checkpoints.load(found[0])["state_dict"])
    load_selected(spec, run.checkpoints, module.model)  # the weights the run scored
    return module.model.to(device).eval(), spec, vocab, info


def find_run(root: Path, ref: str) -> RunDir:
    """A stored run by (a unique prefix of) its id, or by its directory."""
    path = Path(ref)
    if (path / "spec.yaml").exists():
        return RunDir(path.parent.parent.parent, path.parent.name, path.name)
    matches = sorted(root.glob(f"runs/*/{ref}*/spec.yaml"))
    if len(matches) != 1:
        raise UserError(f"run {ref!r} matches {len(matches)} stored runs under {root}/runs; give a longer id or a path")
    return RunDir(root, matches[0].parent.parent.name, matches[0].parent.name)
