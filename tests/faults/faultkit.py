"""The fault-injection matrix's toolkit: tiny manifests, and the code its child processes run.

Children are real processes forked from a fork server that has already imported the package (a fresh
interpreter takes seconds to import torch and Lightning; a fork takes milliseconds). A child runs the
``repro`` CLI (or ``run_spec``) with faults injected: a signal sent to itself at a chosen point of
training (the kernel delivers it like any other), a file-size limit (a full disk), another user.
"""

from __future__ import annotations

import importlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import lightning.pytorch as pl
import torch

MODELS = {
    "dense": "{family: sparse_transformer, pattern: dense, layers: 1, d_model: 32, heads: 2, stride: 8, dropout: 0.1}",
    "strided": "{family: sparse_transformer, pattern: strided, layers: 1, d_model: 32, heads: 2, stride: 8, "
    "dropout: 0.1}",
    "adaptive": "{family: adaptive_span, layers: 1, d_model: 32, d_ff: 64, heads: 2, dropout: 0.1, "
    "span: {kind: adaptive, limit: 48, ramp: 8, loss_coef: 1.0e-3}}",
    "dynamic": "{family: adaptive_span, layers: 1, d_model: 32, d_ff: 64, heads: 2, dropout: 0.1, "
    "span: {kind: dynamic, limit: 48, ramp: 8, loss_coef: 1.0e-3}}",
}


def manifest(
    corpus: Path,
    model: str = "dense",
    name: str = "f-run",
    steps: int = 20,
    grid: str = "",
    train: str = "",
    top: str = "",
) -> str:
    return (
        textwrap.dedent(f"""\
        name: {name}
        title: "fault matrix"
        paper: suite
        base:
          data: {{name: file, path: "{corpus}", kind: text8, block: 32}}
          model: {MODELS[model]}
          train: {{optimizer: adam, lr: 3.0e-3, batch_size: 4, steps: {steps}, checkpoint_every: 5, log_every: 2, threads: 1{train}}}
          eval: {{batch_size: 32, min_context: 16}}
        scales:
          tiny: {{}}
        """)
        + grid
        + top
    )


class SignalAt(pl.Callback):
    """Sends ``signum`` to this process at the end of step ``step``, or inside it (``inside=True``:
    between the forward and the backward pass), ``times`` times."""

    def __init__(self, step: int, signum: int, inside: bool = False, times: int = 1):
        self.step, self.signum, self.inside, self.times = step, signum, inside, times

    def _fire(self) -> None:
        for _ in range(self.times):
            os.kill(os.getpid(), self.signum)

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        if self.inside and trainer.global_step + 1 == self.step:
            self._fire()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not self.inside and trainer.global_step == self.step:
            self._fire()


class SignalParentAt(pl.Callback):
    """In DDP rank 0: sends ``signum`` to the main process (as ``kill <pid>`` would) at the end of ``step``."""

    def __init__(self, step: int, signum: int):
        self.step, self.signum = step, signum

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_rank == 0 and trainer.global_step == self.step:
            os.kill(os.getppid(), self.signum)


class PoisonAt(pl.Callback):
    """At the end of step ``step``: fills a parameter tensor with NaN (on DDP rank ``rank`` only, if given)."""

    def __init__(self, step: int, rank: int | None = None):
        self.step, self.rank = step, rank

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step and self.rank in (None, trainer.global_rank):
            with torch.no_grad():
                next(pl_module.model.parameters()).fill_(float("nan"))


class AllocateAt(pl.Callback):
    """Inside step ``step`` (between the forward and the backward pass): asks torch's allocator for
    ``nbytes`` (far beyond any machine: the allocator's own out-of-memory error, as a batch too large
    for the memory raises it)."""

    def __init__(self, step: int, nbytes: int = 2**50):
        self.step, self.nbytes = step, nbytes

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        if trainer.global_step + 1 == self.step:
            torch.empty(self.nbytes, dtype=torch.uint8)


class Gate(pl.Callback):
    """At the end of step ``step``: set ``ready`` and wait for ``go`` (another process's turn)."""

    def __init__(self, step: int, ready, go):
        self.step, self.ready, self.go = step, ready, go

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            self.ready.set()
            self.go.wait(120)


def child(
    argv: list[str],
    env: dict,
    out: str,
    callbacks: list = (),
    kill_in_eval: int = 0,
    kill_in_save: int = 0,
    file_limit: int = 0,
    as_user: int | None = None,
    umask: int | None = None,
    kill_in_rename: str = "",
    kill_in_savefig: bool = False,
    call: tuple | None = None,
    signal_after: int = 0,
    signal_in: tuple[str, str, int] | None = None,
) -> None:
    """Process target: ``repro ARGV`` with stdout/stderr to ``out``.out/.err and the faults asked for
    (``kill_in_eval``: this signal when the final evaluation starts; ``kill_in_save=N``: kill -9 half-way
    through writing the N-th checkpoint; ``kill_in_rename``: kill -9 instead of the first ``os.replace``
    whose source's name contains it; ``kill_in_savefig``: kill -9 half-way through writing a figure);
    exits with the CLI's status (or dies of the signal). ``call=(function, args)`` calls it instead
    of the CLI (exit status 0, or 2 with the message of a UserError, as the CLI). ``signal_after``: this
    signal once the CLI has returned (a repeated signal that arrives while the process exits);
    ``signal_in=(module, function, signum)``: this signal when ``module.function`` is called."""
    os.environ.clear()
    os.environ.update(env)
    for fd, suffix in ((1, ".out"), (2, ".err")):
        os.dup2(os.open(out + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    if umask is not None:
        os.umask(umask)
    if file_limit:  # a "full disk": writes past this size fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    if as_user is not None:
        os.setgid(as_user)
        os.setuid(as_user)
    import torch

    from repro import cli
    from repro.train import finish, runner

    torch.set_num_threads(1)  # tiny models: one thread is far faster

    if callbacks:
        plain = runner.run_spec
        runner.run_spec = lambda *a, **k: plain(*a, **{**k, "callbacks": list(callbacks)})
    if kill_in_eval:
        evaluate = finish.evaluate

        def dying(*args, **kwargs):
            os.kill(os.getpid(), kill_in_eval)
            return evaluate(*args, **kwargs)

        finish.evaluate = dying
    if kill_in_save:
        save, calls = torch.save, [0]

        def dying_save(obj, f, *args, **kwargs):
            calls[0] += 1
            if calls[0] == kill_in_save:
                f.write(b"PK\x03\x04 half a checkpoint")
                f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return save(obj, f, *args, **kwargs)

        torch.save = dying_save
    if kill_in_rename:
        replace = os.replace

        def dying_replace(src, dst, *args, **kwargs):
            if kill_in_rename in os.path.basename(str(src)):
                os.kill(os.getpid(), signal.SIGKILL)
            return replace(src, dst, *args, **kwargs)

        os.replace = dying_replace
    if signal_in is not None:
        module, name, signum = signal_in
        owner = importlib.import_module(module)
        plain = getattr(owner, name)

        def signalled(*args, **kwargs):
            os.kill(os.getpid(), signum)
            return plain(*args, **kwargs)

        setattr(owner, name, signalled)
    if kill_in_savefig:
        from matplotlib.figure import Figure

        def dying_savefig(self, fname, *args, **kwargs):
            fh = open(fname, "wb") if isinstance(fname, (str, os.PathLike)) else fname  # noqa: SIM115
            fh.write(b"\x89PNG half a figure")
            fh.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        Figure.savefig = dying_savefig
    if call is not None:
        from repro.errors import UserError

        try:
            call[0](*call[1])
            code = 0
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            code = 2
    else:
        code = cli.main(argv)
    if signal_after:
        os.kill(os.getpid(), signal_after)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def one_error(capsys, argv: list[str], code: int = 2) -> str:
    """``repro ARGV`` exits with ``code`` and says why in one line of stderr (no traceback): that line."""
    from repro.cli import main

    got = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert got == code and len(lines) == 1 and "Traceback" not in err, (got, err)
    return lines[0]


def reported_copy(straight, tmp_path: Path) -> Path:
    """A copy of the ``straight`` run's store under ``tmp_path/results`` and its manifest, rendering the
    training curves, at ``tmp_path/m.yaml`` (returned)."""
    import shutil

    shutil.copytree(straight.base / "results", tmp_path / "results")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        (straight.base / "dense.yaml").read_text().replace("name: f-run", "name: f-run\nrenders: [curves]")
    )
    return manifest


def repro_process(argv: list[str]) -> subprocess.CompletedProcess:
    """``python -m repro ARGV`` in a fresh process, each time without the store's index (so that it reads
    the run's files); one that hangs fails the test by its timeout."""
    shutil.rmtree(Path(os.environ["REPRO_RESULTS"]) / "index", ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "repro", *argv], capture_output=True, text=True, env=env, timeout=120)
