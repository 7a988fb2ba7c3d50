"""Lightning pieces shared by every model family: the LightningModule, the DataModule, callbacks.

The module owns the optimisation recipe (Adagrad with the official per-tensor clipping, Adam(W) with
global-norm clipping, warm-up, constant/cosine, the lr/10 final phase), the recurrent state carried
between training blocks, divergence detection and everything a checkpoint needs for an exact resume
(every rank's RNG states and recurrent state), and the callbacks that checkpoint at step boundaries,
measure training and print its progress off a TTY.
"""

from __future__ import annotations

import math
import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, IterableDataset

from repro.config.spec import RunSpec, TrainSpec
from repro.data.batching import SequenceBatches, StreamBatches
from repro.models import family
from repro.models.base import LanguageModel, detach_state, map_state
from repro.progress import Every, duration, say
from repro.store.checkpoints import LAST, RUN_ID
from repro.train import distributed, memory, signals, throughput
from repro.train.evaluation import evaluate
from repro.train.optim import AdagradClip

LN2 = math.log(2.0)


@dataclass(frozen=True)
class Divergence:
    """Training stopped being finite at optimizer step ``step``: its ``loss``, or its ``parameters``
    found at a checkpoint boundary.

    The checks record it and stop training after the step, without its update and without another
    checkpoint (the last good one stays). It is no exception because a DDP worker's exception reaches
    the main process only as text; it travels in ``trainer.callback_metrics``, which Lightning carries
    back from the workers, and :meth:`found` reads it there (launched ranks each read their own: the
    checks agree across ranks, so every rank finds the same)."""

    step: int
    what: str  # "loss" or "parameters"

    WHAT = ("loss", "parameters")

    def __str__(self) -> str:
        return f"{self.what} became non-finite at step {self.step}"

    def record(self, metrics: dict[str, torch.Tensor]) -> None:
        metrics[f"diverged_{self.what}_at_step"] = torch.tensor(self.step)

    @classmethod
    def found(cls, metrics: dict[str, torch.Tensor]) -> Divergence | None:
        for what in cls.WHAT:
            if f"diverged_{what}_at_step" in metrics:
                return cls(int(metrics[f"diverged_{what}_at_step"]), what)
        return None


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
        self.model: LanguageModel = family(spec.family).Model(spec.model, vocab_size, spec.data.block, shape)
        self.valid = valid  # split used by quick validations (None: no quick validation)
        self._state: Any = None  # recurrent state carried across training blocks
        self._resumed_rng: dict[str, Any] | None = None  # this rank's RNG states of the checkpoint (first step)
        self.checkpoint_stats: dict[str, Any] | None = None  # model.stats() as of the last checkpoint
        self.last_quick_valid: tuple[int, float] | None = None  # (optimizer steps, bits) of the latest one
        self.diverged: Divergence | None = None

    def forward(self, x: torch.Tensor, state: Any = None):
        return self.model(x, state)

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        """``batch``: (x, y) or (x, y, new_pass); a new pass over the data starts the recurrent state afresh.
        Once training diverged, a loss without an update (:meth:`_no_update`)."""
        if self.diverged is not None:  # the parameters were found non-finite at this step's boundary
            return self._no_update()
        x, y, *new_pass = batch
        if self._state is None or (new_pass and bool(new_pass[0])):
            self._state = self.model.init_state(x.size(0), x.device)
        out = self.model(x, self._state)
        self._state = detach_state(out.state)
        nll = F.cross_entropy(out.logits.float().flatten(0, 1), y.flatten())
        loss = nll if out.aux_loss is None else nll + out.aux_loss
        if not self.finite_everywhere(bool(torch.isfinite(loss))):
            self.diverge(Divergence(self.global_step, "loss"))
            return self._no_update()
        self.log("train/bits", nll / LN2, prog_bar=True)
        if out.aux_loss is not None:
            self.log("train/aux_loss", out.aux_loss.detach())
        return loss

    def _no_update(self) -> torch.Tensor:
        """A loss that reaches every parameter with a zero gradient (even a NaN one): DDP's backward
        runs as in every step (Lightning skips no step under DDP), and :meth:`on_before_optimizer_step`
        drops the gradients, so the optimiser changes nothing."""
        return torch.stack([p.sum() for p in self.parameters() if p.requires_grad]).sum() * 0.0

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.diverged is not None:
            optimizer.zero_grad(set_to_none=True)  # parameters without a gradient are left as they are

    def finite_everywhere(self, finite: bool) -> bool:
        """``finite`` on every DDP rank, so that all of them take the same branch."""
        return self.trainer.strategy.reduce_boolean_decision(finite, all=True)

    def diverge(self, divergence: Divergence) -> None:
        """Record the first divergence and stop training after this step."""
        self.diverged = self.diverged or divergence
        self.trainer.should_stop = True

    def on_train_end(self) -> None:
        if self.diverged is not None:
            self.diverged.record(self.trainer.callback_metrics)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.diverged is not None:  # no update happened: nothing to clamp, log or validate
            return
        self.model.after_optimizer_step()
        step, train = self.global_step, self.spec.train
        if step % train.log_every == 0:
            self.log("train/lr", self.optimizers().param_groups[0]["lr"])
            for key, value in _flatten(self.model.stats(), "model"):
                self.log(key, value)
        if self.valid is not None and train.val_every and step % train.val_every == 0:
            bits = self.quick_validation()  # straight to the loggers: self.log would repeat it every step
            self.last_quick_valid = (step, bits)  # for repro.train.selection.BestCheckpoint
            for logger in self.loggers:
                logger.log_metrics({"valid/bits_quick": bits}, step=step - 1)

    def quick_validation(self) -> float:
        """Bits on the first ``val_tokens`` targets of the valid split (the final evaluation scores all)."""
        result = evaluate(
            self.model, self.valid, self.spec, self.device, self.vocab_size, max_targets=self.spec.train.val_tokens
        )
        self.model.train()
        return result["bits"]

    def configure_optimizers(self):
        train = self.spec.train
        params = [p for p in self.parameters() if p.requires_grad]
        if train.optimizer == "adagrad":  # the per-tensor clip lives in the optimiser (repro.train.optim)
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
        (:class:`repro.train.optim.AdagradClip`)."""
        train = self.spec.train
        if train.clip > 0 and train.clip_mode == "global_norm":
            torch.nn.utils.clip_grad_norm_(self.parameters(), train.clip)

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self._resumed_rng is not None:  # now: creating the data loader's iterator drew from the RNG
            set_rng_state(self._resumed_rng)
            self._resumed_rng = None
            self._state = map_state(self._state, lambda t: t.to(self.device))  # loaded on the CPU

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Every rank's RNG states and recurrent state, gathered to rank 0 (which writes the file)."""
        checkpoint[RANKS] = distributed.gather({"rng": rng_state(), "state": map_state(self._state, torch.Tensor.cpu)})
        checkpoint[RUN_ID] = self.spec.run_id
        self.checkpoint_stats = checkpoint["repro_stats"] = self.model.stats()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """This rank's part. Saved by another number of processes, the streams' partition differs: the
        recurrent state starts afresh and rank r takes saved rank r's RNG states (r modulo their number)."""
        ranks = saved_ranks(checkpoint)
        rank, world = self.trainer.global_rank, self.trainer.world_size
        self._resumed_rng = ranks[rank % len(ranks)]["rng"]
        self._state = ranks[rank]["state"] if len(ranks) == world else None
        self.checkpoint_stats = checkpoint.get("repro_stats")


RANKS = "repro_ranks"  # a checkpoint's per-rank state: [{"rng": ..., "state": ...}] in rank order


def saved_ranks(checkpoint: dict[str, Any]) -> list[dict[str, Any]]:
    """A checkpoint's per-rank state (one rank for a checkpoint written before DDP state was saved)."""
    if RANKS in checkpoint:
        return checkpoint[RANKS]
    return [{"rng": checkpoint["repro_rng"], "state": checkpoint["repro_model_state"]}]


def rng_state() -> dict[str, Any]:
    """Every RNG's state as tensors and plain data (a checkpoint loads with ``weights_only``)."""
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _flatten(stats: dict[str, Any], prefix: str) -> Iterator[tuple[str, float]]:
    """Numeric statistics as flat scalars: nested lists become ``key/i/j`` (per-layer, per-head spans)."""
    for key, value in stats.items():
        name = f"{prefix}/{key}"
        if isinstance(value, (list, tuple)):
            yield from _flatten({str(i): v for i, v in enumerate(value)}, name)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield name, float(value)


class _TrainBatches(IterableDataset):
    """Endless training batches (x, y, new_pass) from the trainer's current step on: resuming resumes the
    data position. Under DDP every rank takes its slice of the same global batch, so recurrent streams
    stay contiguous."""

    def __init__(self, batches: StreamBatches | SequenceBatches, trainer: pl.Trainer):
        self.batches, self.trainer = batches, trainer

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        step, world, rank = self.trainer.global_step, self.trainer.world_size, self.trainer.global_rank
        while True:
            x, y = self.batches[step]
            yield x.chunk(world)[rank], y.chunk(world)[rank], torch.tensor(self.batches.starts_pass(step))
            step += 1


class LMDataModule(pl.LightningDataModule):
    def __init__(self, spec: RunSpec, train: np.ndarray, start_token: int):
        super().__init__()
        b = spec.train.batch_size
        if train.ndim == 1:
            self.batches = StreamBatches(train, b, spec.data.block, spec.train.stream_passes, spec.train.seed)
        else:
            self.batches = SequenceBatches(train, b, spec.train.seed, start_token)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_TrainBatches(self.batches, self.trainer), batch_size=None)


class BoundaryCheckpoint(pl.Callback):
    """Saves ``last.ckpt`` at step boundaries: every ``every`` steps and when training ends, which is
    also how a signal stops it (the step in progress finishes, training stops, the final save runs and
    ``STOPPED`` in ``trainer.callback_metrics`` says which signal; the runner then raises).

    A periodic boundary is the start of the next step: every hook and log of the finished step has run
    (z' clamped, the scheduler stepped, metrics logged) and the next batch is fetched but unused. The
    store's metrics are flushed just before, so metrics.csv always reaches the checkpoint's step.
    Parameters that are no longer finite are never saved: the run diverged (:class:`Divergence`), its
    last checkpoint is good; nor is anything after a divergence.
    """

    STOPPED = "stopped_by_signal"

    def __init__(self, directory: Path, every: int, store_logger: Any):
        self.directory, self.every, self.store_logger = directory, every, store_logger
        self.saved, self.stopping = -1, False

    def on_train_start(self, trainer, pl_module) -> None:
        self.saved = trainer.global_step  # a resumed run's checkpoint already holds this step
        signals.defer(escalate=trainer.world_size == 1)  # DDP workers always reach the boundary

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step % self.every == 0:
            self._save(trainer, pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        stop = signals.requested() is not None
        if trainer.world_size > 1:  # every rank stops after the same step
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            self.stopping = trainer.should_stop = True

    def on_train_end(self, trainer, pl_module) -> None:
        self._save(trainer, pl_module)
        if self.stopping:
            trainer.callback_metrics[self.STOPPED] = torch.tensor(signals.requested() or signal.SIGTERM)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        # Lightning counts the batch fetched for the next step as "ready"; at the boundary it is unused,
        # so record the save as one after the last completed batch: a resumed run then continues the
        # logging step (and the batch count) where the saved run was, and fetches that batch again.
        progress = checkpoint["loops"]["fit_loop"]["epoch_loop.batch_progress"]
        for part in ("total", "current"):
            progress[part]["ready"] = progress[part]["completed"]

    def _save(self, trainer: pl.Trainer, pl_module: LMModule) -> None:
        if trainer.global_step == self.saved or pl_module.diverged is not None:
            return
        finite = torch.stack([p.detach().isfinite().all() for p in pl_module.parameters()]).all()
        if not pl_module.finite_everywhere(bool(finite)):
            pl_module.diverge(Divergence(trainer.global_step, "parameters"))  # the good checkpoint stays
            return
        self.store_logger.flush()
        trainer.save_checkpoint(self.directory / LAST, weights_only=False)
        self.saved = trainer.global_step


class TrainingMeter(pl.Callback):
    """Median wall-clock seconds per training step (each session's first ``skip`` steps, warm-up, not
    counted), the peak memory of training, the training wall time, the machine's 1-minute load average
    and the cores other processes kept busy (``throughput.others_cores``, the run's ``processes`` ranks
    counted as its own), both sampled at the start and every ``load_every`` seconds (their mean and
    maximum), measured in the process that trains and kept in the checkpoint, so a resumed run reports
    its whole training.

    Results go into ``trainer.callback_metrics`` at the end of every fit (even one that had no step
    left to train), which Lightning carries back to the main process under ``ddp_spawn``.
    """

    SECONDS, PEAK, TRAIN_SECONDS = "seconds_per_step", "peak_memory_bytes", "train_seconds"
    LOAD_MEAN, LOAD_MAX = "load_average_mean", "load_average_max"
    OTHERS_MEAN, OTHERS_MAX = "others_cores_mean", "others_cores_max"

    def __init__(self, skip: int = 3, load_every: float = 10.0, processes: int = 1):
        self.skip, self.load_every, self.processes = skip, load_every, processes
        self.loads: list[float] = []  # 1-minute load averages sampled over training, every session
        self.others: list[float] = []  # cores other processes kept busy, per sampled interval, every session
        self._cpu: tuple[float, float, float] | None = None  # the last CPU-time sample of this session
        self.times: list[float] = []  # step times after warm-up, every session of the run
        self.warm: list[float] = []  # warm-up step times (used only when a run is too short for others)
        self.peak, self.seconds = 0, 0.0  # earlier sessions' peak memory and training seconds
        self._device: torch.device | None = None
        self._started = self._t0 = self._loaded = 0.0
        self._steps = 0

    def on_train_start(self, trainer, pl_module) -> None:
        self._device = pl_module.device
        memory.reset_peak(self._device)
        self._started, self._steps, self._cpu = time.perf_counter(), 0, None  # no interval spans a restart
        self._sample_load()

    def _sample_load(self) -> None:
        self.loads.append(os.getloadavg()[0])
        self._loaded = time.perf_counter()
        sample = throughput.cpu_sample()
        if sample is not None and self._cpu is not None:
            self.others.append(throughput.others_cores(self._cpu, sample, self.processes))
        self._cpu = sample

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        (self.times if self._steps >= self.skip else self.warm).append(time.perf_counter() - self._t0)
        self._steps += 1
        if time.perf_counter() - self._loaded >= self.load_every:
            self._sample_load()

    def _peak(self) -> int:
        return max(self.peak, memory.peak_bytes(self._device)) if self._device is not None else self.peak

    def _seconds(self) -> float:
        return self.seconds + (time.perf_counter() - self._started if self._device is not None else 0.0)

    def state_dict(self) -> dict[str, Any]:
        return {
            "times": torch.tensor(self.times, dtype=torch.float64),
            "warm": torch.tensor(self.warm, dtype=torch.float64),
            "peak": self._peak(),
            "seconds": self._seconds(),
            "loads": torch.tensor(self.loads, dtype=torch.float64),
            "others": torch.tensor(self.others, dtype=torch.float64),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.times, self.warm = state["times"].tolist(), state["warm"].tolist()
        self.peak, self.seconds = int(state["peak"]), float(state["seconds"])
        self.loads = state["loads"].tolist() if "loads" in state else []  # checkpoints before loads were kept
        self.others = state["others"].tolist() if "others" in state else []  # and before CPU shares were

    def on_fit_end(self, trainer, pl_module) -> None:
        if self._device is not None:
            self._sample_load()
        times = self.times or self.warm
        if times:
            trainer.callback_metrics[self.SECONDS] = torch.tensor(float(np.median(times)))
        if self._device is not None or self.peak:
            trainer.callback_metrics[self.PEAK] = torch.tensor(float(self._peak()))
        trainer.callback_metrics[self.TRAIN_SECONDS] = torch.tensor(round(self._seconds(), 2), dtype=torch.float64)
        if self.loads:
            trainer.callback_metrics[self.LOAD_MEAN] = torch.tensor(float(np.mean(self.loads)))
            trainer.callback_metrics[self.LOAD_MAX] = torch.tensor(float(np.max(self.loads)))
        if self.others:
            trainer.callback_metrics[self.OTHERS_MEAN] = torch.tensor(float(np.mean(self.others)))
            trainer.callback_metrics[self.OTHERS_MAX] = torch.tensor(float(np.max(self.others)))


FIRST_STEPS = 10  # a run's first progress line: its ETA from these steps, before the first 5%


class ProgressLines(pl.Callback):
    """A line after the first :data:`FIRST_STEPS` steps, then every ``every_steps`` steps or
    ``every_seconds`` seconds, whichever comes first, and at the last step: ``step 120/600  train bits
    2.913  0.210 s/step  ETA 1m41s`` (rank 0's, under DDP)."""

    def __init__(
        self,
        steps: int,
        every_steps: int,
        every_seconds: float = 30.0,
        echo: Callable[[str], None] = say,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.steps, self.every_steps, self.every_seconds = steps, max(1, every_steps), every_seconds
        self.echo, self.clock = echo, clock

    def on_train_start(self, trainer, pl_module) -> None:
        # a resumed run starts where it stopped; the first line after a few steps: an early ETA
        first = min(self.every_steps, FIRST_STEPS)
        self.when = Every(self.steps, self.every_steps, first, self.every_seconds, trainer.global_step, self.clock)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not trainer.is_global_zero:
            return
        step = trainer.global_step
        if not self.when.due(step):
            return
        per_step = self.when.rate(step)
        bits = trainer.callback_metrics.get("train/bits")
        shown = f"{float(bits):.3f}" if bits is not None else "?"
        self.echo(
            f"  step {step}/{self.steps}  train bits {shown}  {per_step:.3f} s/step  "
            f"ETA {duration(per_step * (self.steps - step))}"
        )
