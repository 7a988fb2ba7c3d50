"""The LightningModule and the DataModule both model families share.

The module owns the optimisation recipe (Adagrad with the official per-tensor clipping, Adam(W) with
global-norm clipping, warm-up, constant/cosine, the lr/10 final phase), the recurrent state carried
between training blocks, divergence detection (:class:`repro.train.callbacks.Divergence`) and what a
checkpoint needs for an exact resume (:mod:`repro.train.resume`). The DataModule deals the training
batches from the trainer's current step on, so a resume resumes the data position.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
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
from repro.store.checkpoints import RUN_ID
from repro.train import distributed
from repro.train.callbacks import Divergence
from repro.train.evaluation import evaluate
from repro.train.optim import AdagradClip
from repro.train.resume import RANKS, rng_state, saved_ranks, set_rng_state

LN2 = math.log(2.0)


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
