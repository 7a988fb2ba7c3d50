"""What changes a run's numbers besides its spec, pinned before it trains, and recorded beside them.

On one torch build and one CPU the bits of a run depend on the intra-op thread count (a reduction split
over more threads adds in another order), so the runner sets it from ``train.threads`` whatever
``OMP_NUM_THREADS`` says, asks torch for its deterministic algorithms (``warn_only``: an op without one
warns, it does not stop the run; on CUDA cuBLAS gets the workspace setting those need), and the training
batches are made in the training process (no data-loader workers). The CPU instruction set the kernels may
use is pinned when repro is imported (repro/cpu_isa.py: AVX2 by default, ``REPRO_CPU_ISA``). The summary's
``environment`` names the rest: torch and Lightning versions, the CPU model or GPU name, the instruction
set pinned and the one torch runs, the thread count and the precision.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import lightning
import torch

from repro import cpu_isa
from repro.config.spec import RunSpec
from repro.errors import UserError


@contextlib.contextmanager
def pinned(spec: RunSpec) -> Iterator[None]:
    """Inside: ``spec.train.threads`` intra-op threads and deterministic algorithms; the caller's settings
    come back after (a test or a notebook that runs several specs keeps its own). The instruction set is
    the process's (pinned at import, again here while no kernel has chosen yet): a process whose kernels
    chose another before is refused, one line, since its bits would not be the pinned ones."""
    wanted = cpu_isa.choice()
    if wanted not in cpu_isa.CHOICES:
        raise UserError(
            f"REPRO_CPU_ISA: {wanted!r} is not an instruction-set choice; expected one of {', '.join(cpu_isa.CHOICES)}"
        )
    if cpu_isa.pin() == "avx2" and torch.backends.cpu.get_cpu_capability() not in ("AVX2", "DEFAULT"):
        raise UserError(
            f"REPRO_CPU_ISA=avx2, but torch already runs {torch.backends.cpu.get_cpu_capability()} kernels in this "
            "process (torch ran before repro was imported): start a fresh process, or set REPRO_CPU_ISA=native"
        )
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts
    torch.set_num_threads(spec.train.threads)
    with contextlib.suppress(RuntimeError):  # allowed only before the first inter-op parallel work
        torch.set_num_interop_threads(spec.train.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


def describe(spec: RunSpec) -> dict[str, Any]:
    """The environment a run's numbers came from (the summary's ``environment``)."""
    cuda = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "lightning": lightning.__version__,
        "device": torch.cuda.get_device_name(0) if cuda else cpu_isa.model(),
        "cpu_isa": cpu_isa.pin(
            dict(os.environ)
        ),  # what repro pinned: avx2, or none (native, or a CPU it does not apply to)
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the kernels torch runs: AVX2, AVX512, ...
        "threads": torch.get_num_threads(),
        "precision": spec.train.precision,
    }
