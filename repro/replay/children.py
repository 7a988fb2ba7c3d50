"""The training child of ``repro retrain`` and ``repro verify``: started in a session of its own, told of
the signals that stop its parent, and killed when its parent dies.

The child (the commit's own ``repro run``) has its own session, so a terminal's Ctrl-C or hang-up reaches
the parent alone, which passes SIGTERM, SIGINT and SIGHUP on to the child's process group (each time one
comes: a second one stops the child at once), waits for it to checkpoint at its step boundary and exit,
and then stops with :class:`repro.train.signals.Interrupted` (exit 143, 130, 129), saying what it leaves
(retrain: the scratch run, which the same command resumes; verify: nothing, its scratch folder removed).
On Linux the child is also killed as its parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``): a ``kill -9``
of the parent leaves no orphan training on, its scratch run's lock is free at once, and the next retrain
resumes that run from its last checkpoint.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from repro.train import signals

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def run(
    command: list[str],
    cwd: Path,
    env: dict[str, str],
    log: TextIO,
    interrupted: str,
    follow: Callable[[str], None] | None = None,
) -> int:
    """``command``'s exit status, its output (stdout and stderr) to ``log``; with ``follow``, read line by
    line as it comes, each line written to ``log`` (flushed) and then given to ``follow``. A signal that
    came meanwhile is passed on to it and, once it has exited, raised as :class:`Interrupted` with
    ``interrupted``: what the command leaves."""
    got: list[int] = []
    child: subprocess.Popen | None = None

    def forward(signum: int, frame) -> None:
        got.append(signum)
        if child is not None:
            _signal(child, signum)

    here = threading.current_thread() is threading.main_thread()  # signal handlers: the main thread only
    previous = {sig: signal.signal(sig, forward) for sig in signals.SIGNALS} if here else {}
    try:
        child = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=log if follow is None else subprocess.PIPE,
            stderr=log if follow is None else subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
            preexec_fn=_dying_with(os.getpid()),
        )
        if got:  # it came while the child started
            _signal(child, got[0])
        if follow is not None:
            for line in child.stdout:  # a signal meanwhile is passed on, and the reading goes on
                log.write(line)
                log.flush()
                follow(line)
        child.wait()
    finally:
        if child is not None and child.poll() is None:  # this process stops on an error: so does the child
            child.kill()
            child.wait()
        if child is not None and child.stdout is not None:
            child.stdout.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if got:
        raise signals.Interrupted(got[0], interrupted)
    return child.returncode


def _signal(child: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # it has exited
        os.killpg(child.pid, signum)  # its session's group: the child and any process it started


def _dying_with(parent: int) -> Callable[[], None] | None:
    """What the child runs before its command (Linux): be killed when ``parent`` dies, and at once if it
    died while the child started. Elsewhere nothing (an orphan then trains on until it finishes)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec
