"""SIGTERM, SIGINT and SIGHUP for training: stop at the next step boundary with a checkpoint, exit 143,
130 or 129.

A cluster pre-empts a job with SIGTERM (SLURM sends it some time before SIGKILL); Ctrl-C sends SIGINT; a
closed terminal sends SIGHUP, treated as SIGTERM. :func:`install` puts our handler on all three. While training (:func:`deferring`) the first signal is only
recorded: the trainer finishes the step, checkpoints and stops, and the runner raises
:class:`Interrupted`. Outside training the handler raises :class:`Interrupted` at once, and so does a
second signal in the main process (the last checkpoint stays valid). DDP workers never stop half-way
(they may get a signal twice: from the process group and forwarded by the main process). Once the
command has its outcome (:func:`closing`), later signals are ignored: a signal repeated while the process
exits cannot raise in an exit handler.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_requested: int | None = None
_deferring = _escalate = _forward = _closing = False


class Interrupted(BaseException):
    """A signal stopped the command (a BaseException: ``except Exception`` does not swallow it)."""

    def __init__(self, signum: int, detail: str = ""):
        super().__init__(signum, detail)
        self.signum, self.detail = signum, detail

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def _handle(signum: int, frame) -> None:
    global _requested
    if _closing:
        return
    if _deferring and (_requested is None or not _escalate):
        if _requested is None and _forward:  # DDP workers learn it from us if the signal was ours alone
            for child in multiprocessing.active_children():
                with contextlib.suppress(OSError):
                    os.kill(child.pid, signum)
        _requested = _requested or signum
        return
    raise Interrupted(signum)


def install() -> None:
    """Handle SIGTERM, SIGINT and SIGHUP with this module (main thread only; elsewhere a no-op)."""
    global _closing
    _closing = False
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _handle)


def requested() -> int | None:
    """The signal received while deferring, if any."""
    return _requested


def defer(escalate: bool = True) -> None:
    """From now on record signals instead of raising (a second one raises if ``escalate``). The trainer
    calls this when training starts: in a DDP worker it is the first install, in the main process it
    takes the signals back from Lightning's own SIGTERM handler (which would exit 0 without a checkpoint)."""
    global _deferring, _escalate
    install()
    _deferring, _escalate = True, escalate


@contextlib.contextmanager
def deferring(forward: bool = False) -> Iterator[None]:
    """Defer signals inside the block (a fresh start: no signal recorded yet), passing the first on to
    child processes if ``forward``; raise again after it."""
    global _requested, _deferring, _forward
    _requested, _forward = None, forward
    defer()
    try:
        yield
    finally:
        _deferring = _forward = False


def closing() -> None:
    """The command has its outcome and is exiting: from now on our handler ignores signals."""
    global _closing
    _closing = True
