"""Lightning pieces shared by every model family: the LightningModule, the DataModule, callbacks.

The module owns the optimisation recipe (Adagrad with the official per-tensor clipping, Adam(W) with
global-norm clipping, warm-up, constant/cosine, the lr/10 final phase), the recurrent state carried
between training blocks, divergence detection and everything a checkpoint needs for an exact resume
(RNG states, the state).
"""
from __future__ import annotations

import math
import os
import random
import resource
import time
from pathlib import Path
from typing import Any, Iterator

import lightning.pytorch as pl
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, IterableDataset

from repro.data.batching import SequenceBatches, StreamBatches
from repro.evaluation import evaluate
from repro.models import family
from repro.models.base import detach_state
from repro.optim import AdagradClip
from repro.spec import RunSpec, TrainSpec

LN2 = math.log(2.0)


class Diverged(RuntimeError):
    """The training loss stopped being finite."""


def lr_factor(step: int, train: TrainSpec) -> float:
    """Multiplier of the base learning rate at optimizer step ``step`` (0-based)."""
    if train.warmup and step < train.warmup:
        return step / train.warmup
    factor = 1.0
    if train.schedule == "cosine":
        span = max(1, train.steps - train.warmup)
        factor = 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - train.warmup) / span)))
    if train.final_phase and step >= train.steps - train.final_phase:
        factor *= 0.1
    return factor


class LMModule(pl.LightningModule):
    """Trains any family's model as an autoregressive density model (loss in nats, logged in bits)."""

    def __init__(self, spec: RunSpec, vocab_size: int, shape: tuple[int, ...] | None, valid: np.ndarray | None = None):
        super().__init__()
        self.spec = spec
        self.vocab_size = vocab_size
        self.model = family(spec.family).Model(spec.model, vocab_size, spec.data.block, shape)
        self.valid = valid  # split used by quick validations (None: no quick validation)
        self._state: Any = None  # recurrent state carried across training blocks

    def forward(self, x: torch.Tensor, state: Any = None):
        return self.model(x, state)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        if self._state is None:
            self._state = self.model.init_state(x.size(0), x.device)
        out = self.model(x, self._state)
        self._state = detach_state(out.state)
        nll = F.cross_entropy(out.logits.float().flatten(0, 1), y.flatten())
        loss = nll if out.aux_loss is None else nll + out.aux_loss
        if not torch.isfinite(loss):
            raise Diverged(f"loss became {loss.item()} at step {self.global_step}")
        self.log("train/bits", nll / LN2, prog_bar=True)
        if out.aux_loss is not None:
            self.log("train/aux_loss", out.aux_loss.detach())
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        after_step = getattr(self.model, "after_optimizer_step", None)
        if after_step is not None:
            after_step()
        step, train = self.global_step, self.spec.train
        if step % train.log_every == 0:
            self.log("train/lr", self.optimizers().param_groups[0]["lr"])
            for key, value in _flatten(self.model.stats(), "model"):
                self.log(key, value)
        if self.valid is not None and train.val_every and step % train.val_every == 0:
            bits = self.quick_validation()  # straight to the loggers: self.log would repeat it every step
            for logger in self.loggers:
                logger.log_metrics({"valid/bits_quick": bits}, step=step - 1)

    def quick_validation(self) -> float:
        """Bits on the first ``val_tokens`` targets of the valid split (the final evaluation scores all)."""
        result = evaluate(self.model, self.valid, self.spec, self.device, self.vocab_size,
                          max_targets=self.spec.train.val_tokens)
        self.model.train()
        return result["bits"]

    def configure_optimizers(self):
        train = self.spec.train
        params = [p for p in self.parameters() if p.requires_grad]
        if train.optimizer == "adagrad":  # the per-tensor clip lives in the optimiser (repro.optim)
            clip = train.clip if train.clip_mode == "per_tensor" else 0.0
            opt = AdagradClip(params, lr=train.lr, clip=clip, weight_decay=train.weight_decay)
        else:
            cls = torch.optim.Adam if train.optimizer == "adam" else torch.optim.AdamW
            opt = cls(params, lr=train.lr, betas=tuple(train.betas), weight_decay=train.weight_decay)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, train))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        """Global-norm clipping of all gradients together, after the backward pass (and after unscaling
        under 16-mixed) and before the optimiser step. Per-tensor clipping is the optimiser's own
        (:class:`repro.optim.AdagradClip`)."""
        train = self.spec.train
        if train.clip > 0 and train.clip_mode == "global_norm":
            torch.nn.utils.clip_grad_norm_(self.parameters(), train.clip)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["repro_rng"] = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                                   "python": random.getstate()}
        checkpoint["repro_model_state"] = self._state

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        rng = checkpoint["repro_rng"]
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        self._state = checkpoint["repro_model_state"]


def _flatten(stats: dict[str, Any], prefix: str) -> Iterator[tuple[str, float]]:
    """Numeric statistics as flat scalars: nested lists become ``key/i/j`` (per-layer, per-head spans)."""
    for key, value in stats.items():
        name = f"{prefix}/{key}"
        if isinstance(value, (list, tuple)):
            yield from _flatten({str(i): v for i, v in enumerate(value)}, name)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield name, float(value)


class _TrainBatches(IterableDataset):
    """Endless training batches from the trainer's current step on: resuming resumes the data position.

    Under DDP every rank takes its slice of the same global batch, so recurrent streams stay contiguous.
    """

    def __init__(self, batches: StreamBatches | SequenceBatches, trainer: pl.Trainer):
        self.batches, self.trainer = batches, trainer

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        step, world, rank = self.trainer.global_step, self.trainer.world_size, self.trainer.global_rank
        while True:
            x, y = self.batches[step]
            yield x.chunk(world)[rank], y.chunk(world)[rank]
            step += 1


class LMDataModule(pl.LightningDataModule):
    def __init__(self, spec: RunSpec, train: np.ndarray, start_token: int):
        super().__init__()
        b = spec.train.batch_size
        if train.ndim == 1:
            self.batches = StreamBatches(train, b, spec.data.block)
        else:
            self.batches = SequenceBatches(train, b, spec.train.seed, start_token)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_TrainBatches(self.batches, self.trainer), batch_size=None)


class AtomicCheckpoint(pl.Callback):
    """Every ``every`` steps, save ``last.ckpt`` via a temp file and a rename (a kill never corrupts it),
    then flush the loggers, so the stored metrics always reach at least the checkpoint's step."""

    def __init__(self, directory: Path, every: int):
        self.directory, self.every = directory, every

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step % self.every == 0 or trainer.global_step == trainer.max_steps:
            self.save(trainer)

    def save(self, trainer: pl.Trainer) -> None:
        tmp = self.directory / f".last.ckpt.{os.getpid()}"
        trainer.save_checkpoint(tmp)
        if trainer.is_global_zero:
            os.replace(tmp, self.directory / "last.ckpt")
            for logger in trainer.loggers:
                logger.save()
        trainer.strategy.barrier()


class TrainingMeter(pl.Callback):
    """Median wall-clock seconds per training step (the first ``skip`` steps, warm-up, not counted) and
    the peak memory of training, measured in the process that trains.

    Results go into ``trainer.callback_metrics`` (``SECONDS`` and ``PEAK``), which Lightning carries
    back to the main process under ``ddp_spawn``.
    """

    SECONDS, PEAK = "seconds_per_step", "peak_memory_bytes"

    def __init__(self, skip: int = 3):
        self.skip, self.times, self._t0 = skip, [], 0.0

    def on_train_start(self, trainer, pl_module) -> None:
        reset_peak_memory(pl_module.device)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.times.append(time.perf_counter() - self._t0)

    def on_train_end(self, trainer, pl_module) -> None:
        times = self.times[self.skip:] or self.times
        if times:
            trainer.callback_metrics[self.SECONDS] = torch.tensor(float(np.median(times)))
        trainer.callback_metrics[self.PEAK] = torch.tensor(float(peak_memory_bytes(pl_module.device)))


def reset_peak_memory(device: torch.device) -> None:
    """Start a fresh peak: CUDA's allocator statistics, or the process's peak RSS on Linux (so runs that
    share one process do not inherit an earlier run's peak)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    except OSError:
        pass  # not Linux: the peak is the process's lifetime peak


def peak_memory_bytes(device: torch.device) -> int:
    """Peak memory since :func:`reset_peak_memory`: bytes allocated by torch on CUDA; on CPU the peak
    resident set size of this process (model, optimizer, activations and the runtime together)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024
    except (OSError, StopIteration):
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
