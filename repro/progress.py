"""Progress lines for logs (off a TTY, where Lightning's bar is off): printed at once, and the durations
they show (``repro run``'s line per run, :mod:`repro.plan.eta`; a training run's lines,
:class:`repro.train.callbacks.ProgressLines`). No Lightning here: the CLI imports this module at start-up."""

from __future__ import annotations

import time
from collections.abc import Callable


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


class Every:
    """When a progress line is due: after the first ``first`` units (an early rate, so an early ETA), then
    every ``every`` units or ``seconds`` seconds, whichever comes first, and at the ``total``."""

    def __init__(
        self,
        total: float,
        every: float,
        first: float,
        seconds: float = 30.0,
        start: float = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.every, self.first, self.seconds, self.clock = total, max(1, every), first, seconds, clock
        self.start = self.last = start
        self.began = self.at = clock()

    def due(self, done: float) -> bool:
        now = self.clock()
        early = self.last == self.start and done - self.start >= self.first
        if not early and done - self.last < self.every and now - self.at < self.seconds and done < self.total:
            return False
        self.last, self.at = done, now
        return True

    def rate(self, done: float) -> float:
        """Seconds per unit since the start."""
        return (self.at - self.began) / max(1, done - self.start)


class Lines:
    """Progress lines of a loop over ``total`` units, off a terminal (on one, a bar): after the first 1%,
    then every quarter or 30 s, and at the end: ``  evaluating test 120k/247k targets  ETA 1m10s``."""

    def __init__(self, what: str, total: int, unit: str, echo: Callable[[str], None] = say, **when):
        self.what, self.total, self.unit, self.echo = what, total, unit, echo
        self.done = 0
        self.when = Every(total, max(1, total // 4), max(1, total // 100), **when)

    def update(self, n: int) -> None:
        self.done += n
        if self.when.due(self.done):
            left = self.when.rate(self.done) * max(0, self.total - self.done)
            self.echo(f"  {self.what} {_count(self.done)}/{_count(self.total)} {self.unit}  ETA {duration(left)}")

    def close(self) -> None:
        """Nothing to close (a bar's interface)."""


def _count(n: int) -> str:
    """``950``, ``1.5k``, ``120k``, ``3.2M``."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1e6:.1f}M"
