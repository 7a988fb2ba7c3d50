"""One RunSpec -> Lightning fit -> full-split evaluation -> the run store (+ W&B).

A run whose summary says ``finished`` is skipped. Otherwise it starts, or resumes from its
``last.ckpt`` (model, optimizer, scheduler, data position, RNG and recurrent state all restored).
A diverging run is marked ``failed`` and keeps its last good checkpoint.
"""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import lightning.pytorch as pl
import torch

from repro import data as datasets
from repro.errors import UserError
from repro.evaluation import evaluate, unigram_bits
from repro.manifest import Manifest
from repro.progress import ProgressLines, say
from repro.spec import RunSpec, build_run
from repro.store import FAILED, FINISHED, RUNNING, RunDir, finished_twin
from repro.tracking import StoreLogger, finish_wandb, wandb_logger
from repro.training import AtomicCheckpoint, Diverged, LMDataModule, LMModule, TrainingMeter


@dataclass
class Outcome:
    spec: RunSpec
    status: str  # finished | skipped | reused | failed
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
            raise UserError(f"--only {item!r}: {key!r} matches {len(keys)} grid keys; grid keys: {', '.join(known) or 'none'}")
        (full,) = keys
        kept = [s for s in specs if str(s.cell[full]) == value]
        if not kept:
            values = list(dict.fromkeys(str(s.cell[full]) for s in specs))
            raise UserError(f"--only {item!r}: no run has {full}={value}; {full} takes: {', '.join(values)}"
                            + ("" if len(only) == 1 else " (after the other --only filters)"))
        specs = kept
    return specs


def with_max_steps(spec: RunSpec, max_steps: int | None) -> RunSpec:
    """Cap the training length (a different run: the id changes with the spec)."""
    if max_steps is None or max_steps >= spec.train.steps:
        return spec
    return replace(spec, train=replace(spec.train, steps=max_steps))


def code_version() -> str:
    try:
        here = Path(__file__).resolve().parent
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True).stdout.strip()
        return rev.stdout.strip() + ("+dirty" if dirty else "") if rev.returncode == 0 else "unknown"
    except OSError:
        return "unknown"


def run_spec(spec: RunSpec, manifest: Manifest, root: Path, *, devices: int = 1, wandb_mode: str = "disabled",
             callbacks: Sequence[pl.Callback] = (), echo: Callable[[str], None] = say) -> Outcome:
    run = RunDir(root, spec.manifest, spec.run_id)
    if run.finished:
        return Outcome(spec, "skipped", run.summary())
    twin = finished_twin(root, spec.manifest, spec.run_id)
    if twin is not None:
        echo(f"  same spec already finished under {twin.path.parent.name}: reused, not retrained")
        return Outcome(spec, "reused", run.adopt(twin, spec.manifest, spec.cell))
    options = spec.data.options()
    train_data, vocab = datasets.open_split(spec.data.name, "train", **options)
    info = datasets.dataset_info(spec.data.name)
    source_version, verified = datasets.provenance(spec.data.name, **options)
    valid_data = datasets.open_split(spec.data.name, "valid", **options)[0] if spec.train.val_every else None
    pl.seed_everything(spec.train.seed, verbose=False)
    module = LMModule(spec, vocab.size, info.shape, valid=valid_data)
    run.write_spec({"run_id": spec.run_id, "manifest": spec.manifest, "scale": spec.scale, "cell": spec.cell,
                    "code_version": code_version(), **spec.resolved()})
    store_logger = StoreLogger(run)
    wb = wandb_logger(wandb_mode, spec, manifest.paper, manifest.renders, run)
    params = sum(p.numel() for p in module.model.parameters())
    summary = run.update_summary(
        status=RUNNING, manifest=spec.manifest, run_id=spec.run_id, scale=spec.scale, cell=spec.cell,
        family=spec.family, dataset=spec.data.label, dataset_version=source_version, dataset_verified=verified,
        dataset_unit=vocab.unit, train_tokens=int(train_data.size),
        params=params, wandb_run_id=wb.experiment.id if wb is not None else None)
    resume = run.last_checkpoint
    if resume is not None:
        step = torch.load(resume, map_location="cpu", weights_only=False)["global_step"]
        run.truncate_metrics(step)
        echo(f"  resuming {spec.run_id} from step {step}")
    run.checkpoints.mkdir(parents=True, exist_ok=True)
    if not sys.stderr.isatty():  # a log or a pipe: Lightning's bar is off, print lines instead
        callbacks = [*callbacks, ProgressLines(spec.train.steps, max(spec.train.log_every, spec.train.steps // 20),
                                               echo=echo)]
    trainer = _trainer(spec, run, [store_logger] + ([wb] if wb is not None else []), devices, callbacks)
    started = time.perf_counter()
    try:
        trainer.fit(module, datamodule=LMDataModule(spec, train_data, vocab.size), ckpt_path=resume,
                    weights_only=False)  # our own checkpoint: it holds RNG states (numpy objects)
    except Exception as err:  # under ddp_spawn a worker's Diverged arrives wrapped, hence the text test
        store_logger.save()
        message = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        summary = run.update_summary(status=FAILED, error=message)
        if wb is not None:
            wb.experiment.finish(exit_code=1)
        if not (isinstance(err, Diverged) or "Diverged" in str(err)):
            raise
        echo(f"  run {spec.run_id} diverged: {message}; marked failed, last good checkpoint kept")
        return Outcome(spec, "failed", summary)
    train_seconds = round(time.perf_counter() - started, 2)
    final = {"train_seconds": train_seconds, "steps": spec.train.steps,
             **_evaluate_and_analyse(spec, module.model, trainer, run, vocab, train_data)}
    summary = run.update_summary(status=FINISHED, **final)
    if wb is not None:
        finish_wandb(wb, run)
    return Outcome(spec, "finished", summary)


def _trainer(spec: RunSpec, run: RunDir, loggers: list, devices: int, callbacks: Sequence[pl.Callback]) -> pl.Trainer:
    return pl.Trainer(
        accelerator="auto", devices=devices, strategy="ddp_spawn" if devices > 1 else "auto",
        precision=spec.train.precision, max_steps=spec.train.steps, max_epochs=-1, logger=loggers,
        callbacks=[AtomicCheckpoint(run.checkpoints, spec.train.checkpoint_every), TrainingMeter(), *callbacks],
        enable_checkpointing=False, num_sanity_val_steps=0, limit_val_batches=0, enable_model_summary=False,
        log_every_n_steps=spec.train.log_every, enable_progress_bar=sys.stderr.isatty(),
        default_root_dir=str(run.path), use_distributed_sampler=False,
    )


def _evaluate_and_analyse(spec: RunSpec, model: torch.nn.Module, trainer: pl.Trainer, run: RunDir,
                          vocab, train_data) -> dict:
    """Summary numbers of a trained model: speed, memory, FLOPs, its statistics, bits on every split
    (and at every swept context), the unigram level of the valid split; stores the family's figure
    arrays (analysis.npz)."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(device)
    measured = {key: float(trainer.callback_metrics[key]) if key in trainer.callback_metrics else None
                for key in (TrainingMeter.SECONDS, TrainingMeter.PEAK)}
    if measured[TrainingMeter.PEAK] is not None:
        measured[TrainingMeter.PEAK] = int(measured[TrainingMeter.PEAK])
    final = {**measured, "flops_per_token": float(model.flops_per_token()), **model.stats()}
    splits = {name: datasets.open_split(spec.data.name, name, **spec.data.options())[0]
              for name in {*spec.eval.splits, "valid", *(["test"] if spec.eval.context_sweep else [])}}
    final["unigram_bits"] = unigram_bits(train_data, splits["valid"], vocab.size)
    for name in spec.eval.splits:
        result = evaluate(model, splits[name], spec, device, vocab.size, progress=True)
        final.update({f"{name}_bits": result["bits"], f"{name}_targets": result["targets"],
                      "eval_procedure": result["procedure"], "eval_min_context": result["min_context"]})
    for context in spec.eval.context_sweep:
        swept = replace(spec, eval=replace(spec.eval, min_context=context))
        final[f"test_bits_ctx{context}"] = evaluate(model, splits["test"], swept, device, vocab.size)["bits"]
    analyses = getattr(model, "analyses", None)
    if analyses is not None:  # arrays behind figures that need the trained model (analysis never loads it)
        run.write_arrays("analysis.npz", analyses(splits["valid"], vocab))
    return final


def load_trained(run: RunDir, device: torch.device | str = "cpu") -> tuple[torch.nn.Module, RunSpec, object, object]:
    """The model of a stored run with its last checkpoint's weights, its spec, vocabulary and dataset info."""
    if run.last_checkpoint is None:
        raise UserError(f"{run.path}: no checkpoint (checkpoints are not committed: re-run it with `repro run`)")
    stored = run.spec()
    spec = build_run(stored["manifest"], stored["scale"], stored.get("cell") or {},
                     {k: stored[k] for k in ("data", "model", "train", "eval")})
    _, vocab = datasets.open_split(spec.data.name, "valid", **spec.data.options())
    info = datasets.dataset_info(spec.data.name)
    module = LMModule(spec, vocab.size, info.shape)
    state = torch.load(run.last_checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    module.load_state_dict(state)
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
