"""Peak memory of a piece of work, measured one way for training and the benchmarks.

CUDA: torch's allocator statistics (bytes allocated by torch). CPU: the process's resident set and its
high-water mark ``VmHWM``, which writing ``5`` to ``/proc/self/clear_refs`` resets to the current set
where the kernel allows it (so work that shares a process does not inherit an earlier peak); without
``/proc`` the peak is the process's lifetime peak (``ru_maxrss``). A CPU peak counts everything the
process holds (model, optimizer, activations and the runtime together).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import resource
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch


def release() -> None:
    """Hand the heap's free pages back to the OS (glibc ``malloc_trim``), after collecting garbage.

    Freed memory stays resident: glibc keeps it in its arenas. Without this, a run trained after a
    larger one in the same process (``repro run`` trains a manifest's runs in turn) starts its peak
    from the earlier run's resident set, so its peak memory says more about the run before it than
    about itself. Where the C library has no ``malloc_trim`` (not glibc), only the collection runs.
    """
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def reset_peak(device: torch.device) -> bool:
    """Start a fresh peak now (on CPU from the live memory only: :func:`release` first); False where a CPU
    peak cannot be reset (it stays the lifetime peak)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return True
    release()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def current_bytes(device: torch.device) -> int:
    """Memory in use now: bytes allocated by torch on CUDA, the resident set on CPU (Linux)."""
    if device.type == "cuda":
        return int(torch.cuda.memory_allocated(device))
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_bytes(device: torch.device) -> int:
    """The peak since :func:`reset_peak`: torch's maximum allocation on CUDA, ``VmHWM`` on CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024
    except (OSError, StopIteration):
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


@dataclass
class Peak:
    bytes: int = 0  # the peak above the memory in use when measuring began (set when it ends)
    reset: bool = True  # False: a CPU peak that could not be reset, so the process's lifetime peak


@contextlib.contextmanager
def measuring(device: torch.device) -> Iterator[Peak]:
    """The peak memory of the work inside the block, above what was in use when it began (a benchmark
    synchronises the device before the block ends)."""
    peak = Peak(reset=reset_peak(device))
    base = current_bytes(device)
    yield peak
    peak.bytes = peak_bytes(device) - base


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is an allocation that failed: Python's MemoryError, torch's OutOfMemoryError (CUDA),
    or the CPU allocator's RuntimeError ("DefaultCPUAllocator: can't allocate memory")."""
    text = str(err)
    return (
        isinstance(err, MemoryError)
        or type(err).__name__ == "OutOfMemoryError"
        or "can't allocate memory" in text
        or "out of memory" in text.lower()
    )
