"""What changes a run's numbers besides its spec, pinned before it trains, and recorded beside them.

On one torch build and one CPU the bits of a run depend on the intra-op thread count (a reduction split
over more threads adds in another order), so the runner sets it from ``train.threads`` whatever
``OMP_NUM_THREADS`` says, asks torch for its deterministic algorithms (``warn_only``: an op without one
warns, it does not stop the run; on CUDA cuBLAS gets the workspace setting those need), and the training
batches are made in the training process (no data-loader workers). The summary's ``environment`` names the
rest: torch and Lightning versions, the CPU model or GPU name, the thread count and the precision.
"""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning
import torch

from repro.config.spec import RunSpec


@contextlib.contextmanager
def pinned(spec: RunSpec) -> Iterator[None]:
    """Inside: ``spec.train.threads`` intra-op threads and deterministic algorithms; the caller's settings
    come back after (a test or a notebook that runs several specs keeps its own)."""
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
        "device": torch.cuda.get_device_name(0) if cuda else cpu_model(),
        "threads": torch.get_num_threads(),
        "precision": spec.train.precision,
    }


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; the platform's word for it elsewhere)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine() or "unknown"
