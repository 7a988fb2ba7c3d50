"""The callbacks a run trains with, and how a divergence travels back from them.

:class:`BoundaryCheckpoint` saves ``last.ckpt`` at step boundaries (and stops training at the next one on
a signal); :class:`TrainingMeter` measures training (step time, peak memory, the machine's load) across
resumes; :class:`ProgressLines` prints progress off a TTY; :class:`Divergence` is what the checks record
when training stops being finite.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from repro.progress import Every, duration, say
from repro.store.checkpoints import LAST
from repro.train import memory, signals, throughput


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


class BoundaryCheckpoint(pl.Callback):
    """Saves ``last.ckpt`` at step boundaries: every ``every`` steps and when training ends, which is
    also how a signal stops it (the step in progress finishes, training stops, the final save runs and
    ``STOPPED`` in ``trainer.callback_metrics`` says which signal; :mod:`repro.train.fit` then raises).

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

    def _save(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
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
    STEAL_MEAN, STEAL_MAX = "steal_cores_mean", "steal_cores_max"
    SAMPLED = (LOAD_MEAN, LOAD_MAX, OTHERS_MEAN, OTHERS_MAX, STEAL_MEAN, STEAL_MAX)  # the machine's load, sampled

    def __init__(self, skip: int = 3, load_every: float = 10.0, processes: int = 1):
        self.skip, self.load_every, self.processes = skip, load_every, processes
        self.loads: list[float] = []  # 1-minute load averages sampled over training, every session
        self.others: list[float] = []  # cores other processes kept busy, per sampled interval, every session
        self.steal: list[float] = []  # of those, the cores the hypervisor gave other guests
        self._cpu: tuple[float, ...] | None = None  # the last CPU-time sample of this session
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
            self.steal.append(throughput.steal_cores(self._cpu, sample))
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
            "steal": torch.tensor(self.steal, dtype=torch.float64),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.times, self.warm = state["times"].tolist(), state["warm"].tolist()
        self.peak, self.seconds = int(state["peak"]), float(state["seconds"])
        self.loads = state["loads"].tolist() if "loads" in state else []  # checkpoints before loads were kept
        self.others = state["others"].tolist() if "others" in state else []  # and before CPU shares were
        self.steal = state["steal"].tolist() if "steal" in state else []  # and before the steal was

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
        if self.steal:
            trainer.callback_metrics[self.STEAL_MEAN] = torch.tensor(float(np.mean(self.steal)))
            trainer.callback_metrics[self.STEAL_MAX] = torch.tensor(float(np.max(self.steal)))


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
