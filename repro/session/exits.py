"""A ``repro`` process: the command (or a launched job) run with standard output watched, and the suite's
errors mapped to exit statuses (:mod:`repro.cli.command` lists them), one line on stderr, no traceback."""

from __future__ import annotations

import codecs
import io
import os
import sys
from collections.abc import Callable

from repro.errors import RunFailed, StoreError, UserError
from repro.train import signals

INTERRUPTED = "stopped before its end; every file it wrote is whole (files are replaced, never written in place)"
RUN_INTERRUPTED = "finished runs are stored; an unfinished run resumes from its last checkpoint"  # repro run, a job


def command(work: Callable[[], int], told: list[str] | None = None, interrupted: str = INTERRUPTED) -> int:
    """``work`` as a whole ``repro`` process: :func:`process` around :func:`statuses` (``told``: gets the
    one-line message it printed, if any: what a launched job hands back to its parent)."""
    return process(lambda stdout: statuses(work, stdout, told, interrupted))


def process(body: Callable[[Watched], int]) -> int:
    """``body`` run as a ``repro`` process: a closed standard output refused, a failed write remembered."""
    # OpenMP threads that busy-wait between parallel regions collapse when another process shares the
    # cores (measured: the blocked sparse kernels ran 6x slower on a loaded 2-core machine); sleeping
    # costs nothing measurable when the machine is idle. Set here, where the command starts (before it
    # imports torch, which reads it once), never on import: a notebook importing repro keeps its own.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if _closed_outputs():
        print("error: standard output is closed (>&-); send it to a file or /dev/null instead", file=sys.stderr)
        return 1
    _any_text()
    stdout = sys.stdout = Watched(sys.stdout)
    try:
        return body(stdout)
    finally:
        sys.stdout = stdout.stream
        signals.closing()  # a signal repeated while the process exits is ignored, not raised in an exit handler


class Watched:
    """Standard output, remembering the error of a write or flush that failed (``> /dev/full``), so that
    it is told apart from any other OSError."""

    def __init__(self, stream):
        self.stream, self.failed = stream, None

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as err:
            self.failed = err
            raise

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as err:
            self.failed = err
            raise

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def statuses(
    work: Callable[[], int], stdout: Watched, told: list[str] | None = None, interrupted: str = INTERRUPTED
) -> int:
    """``work``'s exit status, and the suite's errors mapped to theirs (one line on stderr, no traceback,
    appended to ``told`` too when given); ``interrupted``: what the command leaves when Ctrl-C stops it
    (its parser's ``interrupted`` default: a run's checkpoints, a dataset stored whole)."""

    def tell(line: str) -> None:
        print(line, file=sys.stderr)
        if told is not None:
            told.append(line)

    try:
        status = work()
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return status
    except BrokenPipeError:  # the reader left (`repro status | head -1`): what it read was all it wanted
        _quiet_stdout()
        return 0
    except UserError as err:
        tell(f"error: {err}")
        return 2
    except (StoreError, RunFailed) as err:
        tell(f"error: {err}")
        return 1
    except signals.Interrupted as err:
        signals.closing()
        tell(f"interrupted by {err.name}: {err.detail or 'no run was training'}")
        return err.exit_status
    except KeyboardInterrupt:
        signals.closing()
        tell(f"interrupted by SIGINT: {interrupted}")
        return 130
    except OSError as err:
        if err is not stdout.failed:
            raise
        _quiet_stdout()
        tell(f"error: cannot write to standard output: {err.strerror or err}")
        return 1


def _closed_outputs() -> bool:
    """Whether the process started with standard output closed (``>&-``). A closed standard output or
    error is pointed at /dev/null first, so that no file this process opens takes its descriptor."""
    closed = False
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
            setattr(sys, name, open(fd, "w", closefd=False))  # noqa: SIM115 (the process's own stream)
            closed = closed or fd == 1
    return closed


def _any_text() -> None:
    """Standard output and error write every character: one that the locale's encoding lacks (``LC_ALL=C``
    with ``PYTHONUTF8=0``: ASCII, and an em-dash in a title) goes out in UTF-8, the encoding of every file
    the suite writes, rather than failing the command; a file name's bytes that the locale did not decode
    go out as they came (as Python's ``surrogateescape`` writes them)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and codecs.lookup(stream.encoding).name != "utf-8":
            stream.reconfigure(errors=_AS_UTF8)


def _as_utf8(err: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return err.object[err.start : err.end].encode("utf-8", "surrogateescape"), err.end


_AS_UTF8 = "repro-as-utf-8"
codecs.register_error(_AS_UTF8, _as_utf8)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit does not fail on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
