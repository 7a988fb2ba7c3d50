"""Progress lines for logs (off a TTY, where Lightning's bar is off): a run's step, train bits, s/step
and ETA every N steps or T seconds, and a manifest-level line per run with the ETA of what is left."""

from __future__ import annotations

import time
from collections.abc import Callable

import lightning.pytorch as pl


def say(line: str) -> None:
    """Print a line now (a pipe or a cluster log buffers otherwise)."""
    print(line, flush=True)


def duration(seconds: float) -> str:
    """``45s``, ``3m12s``, ``2h05m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class ProgressLines(pl.Callback):
    """A line every ``every_steps`` steps or ``every_seconds`` seconds, whichever comes first, and at the
    last step: ``step 120/600  train bits 2.913  0.210 s/step  ETA 1m41s`` (rank 0's, under DDP)."""

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
        self.start_step = self.last_step = trainer.global_step  # a resumed run starts where it stopped
        self.start = self.last = self.clock()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step, now = trainer.global_step, self.clock()
        if not trainer.is_global_zero:
            return
        if step - self.last_step < self.every_steps and now - self.last < self.every_seconds and step < self.steps:
            return
        self.last_step, self.last = step, now
        per_step = (now - self.start) / max(1, step - self.start_step)
        bits = trainer.callback_metrics.get("train/bits")
        shown = f"{float(bits):.3f}" if bits is not None else "?"
        self.echo(
            f"  step {step}/{self.steps}  train bits {shown}  {per_step:.3f} s/step  "
            f"ETA {duration(per_step * (self.steps - step))}"
        )


def plan_line(k: int, n: int, elapsed: float, remaining_steps: int, per_step: float | None) -> str:
    """``[k/n] elapsed 3m12s, ETA 10m04s`` (the training steps left at the stored s/step)."""
    eta = f"ETA {duration(per_step * remaining_steps)} (stored s/step)" if per_step else "ETA after a run is timed"
    return f"[{k}/{n}] elapsed {duration(elapsed)}, {eta}"
