"""What changes a run's numbers besides its spec, pinned before it trains, and recorded beside them.

On one torch build and one CPU the bits of a run depend on the intra-op thread count (a reduction split
over more threads adds in another order), so the runner sets it from ``train.threads`` whatever
``OMP_NUM_THREADS`` says, asks torch for its deterministic algorithms (``warn_only``: an op without one
warns, it does not stop the run; on CUDA cuBLAS gets the workspace setting those need), and the training
batches are made in the training process (no data-loader workers). The CPU instruction set the kernels may
use is applied here too, before the run's first tensor operation (repro/cpu_isa.py: native for a new run
unless ``REPRO_CPU_ISA=avx2``; the one a stored run recorded when it is resumed or re-executed). The summary's
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
def pinned(spec: RunSpec, isa: str | None = None) -> Iterator[None]:
    """Inside: the instruction set ``isa`` (None: a run that will not train, none applied),
    ``spec.train.threads`` intra-op threads and deterministic algorithms; the caller's threads and
    algorithms come back after (a test or a notebook that runs several specs keeps its own). The
    instruction set stays: the libraries choose their kernels once per process (:func:`cpu_isa.apply`)."""
    if isa is not None:
        cpu_isa.apply(isa, f"run {spec.run_id}")
        why = None if torch.cuda.is_available() or spec.train.precision != "bf16-mixed" else cpu_isa.bf16_refusal()
        if why:
            raise UserError(
                f"run {spec.run_id}: train.precision: bf16-mixed refused on CPU: {why}, 7-15x slower than "
                "32-true; allowed here: 32-true"
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
        # what repro pinned: avx2, or none (native, or a CPU the pin does not apply to)
        "cpu_isa": cpu_isa.pin(cpu_isa.applied() or cpu_isa.DEFAULT, {}),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the kernels torch runs: AVX2, AVX512, ...
        "threads": torch.get_num_threads(),
        "precision": spec.train.precision,
    }
