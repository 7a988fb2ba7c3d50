"""The end of a trained run: what its finished summary adds (scores, analyses, speed).

The weights the run scores (:mod:`repro.train.selection`) are loaded, every split is evaluated (and the
test split at every swept context), the family's figure arrays are stored (``analysis.npz``, from
:mod:`repro.train.figure_arrays`), and throughput and MFU are computed (docs/throughput.md).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

import lightning.pytorch as pl
import torch

from repro.config.spec import RunSpec
from repro.store.runs import RunDir
from repro.train import distributed, throughput
from repro.train.callbacks import TrainingMeter
from repro.train.evaluation import evaluate, unigram_bits
from repro.train.figure_arrays import figure_arrays
from repro.train.module import LMModule
from repro.train.rundata import RunData
from repro.train.selection import load_selected


def scores(
    spec: RunSpec,
    module: LMModule,
    trainer: pl.Trainer,
    run: RunDir,
    data: RunData,
    world: distributed.World,
    eval_targets: int | None = None,
) -> dict[str, Any]:
    """What a finished run's summary adds: the weights it scored, its scores and analyses, the time the
    evaluation took and its throughput. ``eval_targets``: score only each split's first so many targets
    (a ``--max-steps`` run's evaluation, recorded as ``eval_targets_cap``); None: every target."""
    selected = load_selected(spec, run.checkpoints, module.model)
    if selected["selected"] == "best_valid":
        module.checkpoint_stats = None  # the statistics of the weights scored, not of the last ones
    started = time.perf_counter()
    scored = _evaluate_and_analyse(spec, module, trainer, run, data, eval_targets)
    if eval_targets is not None:
        scored["eval_targets_cap"] = eval_targets
    # eval_seconds: what `repro run`'s ETA adds per run beside the training steps
    final = {"steps": spec.train.steps, **selected, **scored, "eval_seconds": round(time.perf_counter() - started, 2)}
    final.update(_throughput(spec, final, trainer, world))
    return final


def _evaluate_and_analyse(
    spec: RunSpec, module: LMModule, trainer: pl.Trainer, run: RunDir, data: RunData, eval_targets: int | None
) -> dict:
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
        truth = data.truth.get(name)
        result = evaluate(
            model, data.splits[name], spec, device, data.vocab.size, eval_targets, progress=shown, truth=truth
        )
        final.update(
            {
                f"{name}_bits": result["bits"],
                f"{name}_targets": result["targets"],
                "eval_procedure": result["procedure"],
                "eval_min_context": result["min_context"],
                **group_metrics(name, result.get("groups"), truth),
            }
        )
    for context in spec.eval.context_sweep:
        swept = replace(spec, eval=spec.eval.model_copy(update={"min_context": context}))
        swept_bits = evaluate(model, data.splits["test"], swept, device, data.vocab.size, eval_targets)["bits"]
        final[f"test_bits_ctx{context}"] = swept_bits
    # arrays behind figures that need the trained model (renderers never load it)
    run.write_arrays("analysis.npz", figure_arrays(spec.family, model, data.splits["valid"], data.vocab))
    return final


def group_metrics(split: str, groups: dict | None, truth) -> dict[str, float | int]:
    """A synthetic corpus's scores per dependency class as summary keys: ``<split>_bits.<class>`` (classes
    with targets), ``<split>_targets.<class>``, and each class's known ``floor_bits.<class>`` and
    ``blind_bits.<class>`` (:mod:`repro.data.synthetic`); ``unseen`` counts the targets whose source was
    out of the evaluation's view."""
    if not groups:
        return {}
    out: dict[str, float | int] = {}
    for name, scored in groups.items():
        out[f"{split}_targets.{name}"] = scored["targets"]
        if scored["bits"] is not None:
            out[f"{split}_bits.{name}"] = scored["bits"]
    for group in truth.groups:
        out[f"floor_bits.{group.name}"], out[f"blind_bits.{group.name}"] = group.floor, group.blind
    return out


def _throughput(spec: RunSpec, final: dict, trainer: pl.Trainer, world: distributed.World) -> dict:
    """Achieved model FLOP/s and MFU against the device's peak, the FLOPs convention, and the load the
    machine carried over training (repro.train.throughput, docs/throughput.md)."""
    metrics = trainer.callback_metrics
    load = {key: float(metrics[key]) for key in TrainingMeter.SAMPLED if key in metrics}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return {
        **load,
        "cpus": os.cpu_count(),
        "ran_alone": throughput.ran_alone(load.get(TrainingMeter.OTHERS_MAX)),
        **throughput.summary_fields(
            device,
            trainer.precision,  # train.precision as resolved (auto: bf16-mixed or 32-true)
            final.get("flops_per_token"),
            spec.train.batch_size * spec.data.block,
            final.get(TrainingMeter.SECONDS),
            world.processes if device == "cuda" else 1,
        ),
    }
