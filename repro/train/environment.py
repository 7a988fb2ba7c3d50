"""What changes a run's numbers besides its spec, pinned before it trains, and recorded beside them.

On one torch build and one CPU the bits of a run depend on the intra-op thread count (a reduction split
over more threads adds in another order), so the runner sets it from ``train.threads`` whatever
``OMP_NUM_THREADS`` says, asks torch for its deterministic algorithms (``warn_only``: an op without one
warns, it does not stop the run; on CUDA cuBLAS gets the workspace setting those need), and the training
batches are made in the training process (no data-loader workers). The CPU instruction set the kernels may
use is applied here too, before the run's first tensor operation (repro/cpu_isa.py: native for a new run
unless ``REPRO_CPU_ISA=avx2``; the one a stored run recorded when it is resumed or re-executed). The summary's
``environment`` names the rest: torch and Lightning versions, the CPU model or GPU name, the instruction
set pinned and the one torch runs, the CPU vendor (MKL chooses its GEMM kernels per vendor, whatever the
instruction set) and the BLAS library's version, the thread count and the precision it trained in.

``train.precision: auto`` resolves here, per machine (:func:`resolve`): bf16-mixed where the hardware
runs bf16 matrix products natively (a CUDA GPU with bf16; a CPU with AVX-512 BF16 or AMX under native
kernels), else 32-true; a run that recorded what it resolved to keeps it when resumed or re-executed.
Measured per family in docs/throughput.md ("Precision").
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

import lightning
import torch

from repro import cpu_isa
from repro.config.spec import RunSpec
from repro.errors import UserError

RESOLVED = ("32-true", "bf16-mixed")  # what ``auto`` resolves to


def resolve(spec: RunSpec, recorded: str | None = None) -> str:
    """The precision run ``spec`` trains in: its ``train.precision``; for ``auto``, ``recorded`` (what the
    run resolved to when it started: resumed or re-executed, it keeps it), else bf16-mixed where bf16
    matrix products run in hardware (CUDA with bf16; :func:`cpu_isa.bf16_fast`), else 32-true."""
    if spec.train.precision != "auto":
        return spec.train.precision
    if recorded in RESOLVED:
        return recorded
    if torch.cuda.is_available():
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "32-true"
    return "bf16-mixed" if cpu_isa.bf16_fast() else "32-true"


def recorded_precision(environment: Mapping | None) -> str | None:
    """The precision a stored run recorded in its summary's ``environment`` (None: none)."""
    return (environment or {}).get("precision")


@contextlib.contextmanager
def pinned(spec: RunSpec, isa: str | None = None, recorded: str | None = None) -> Iterator[str]:
    """Inside: the instruction set ``isa`` (None: a run that will not train, none applied), ``spec.train.threads``
    intra-op threads and deterministic algorithms; the caller's threads and algorithms come back after (a
    test or a notebook that runs several specs keeps its own). The instruction set stays: the libraries
    choose their kernels once per process (:func:`cpu_isa.apply`). Yields the precision the run trains in,
    resolved once here, after the instruction set that decides it (:func:`resolve`; ``recorded``: the one
    the stored run recorded); the caller passes it on."""
    if isa is not None:
        cpu_isa.apply(isa, f"run {spec.run_id}")
    resolved = resolve(spec, recorded)
    if isa is not None:
        why = None if torch.cuda.is_available() or resolved != "bf16-mixed" else cpu_isa.bf16_refusal()
        if why:
            asked = spec.train.precision
            said = (
                "bf16-mixed" if asked == "bf16-mixed" else f"{asked} (bf16-mixed, as the run recorded when it started)"
            )
            raise UserError(
                f"run {spec.run_id}: train.precision: {said} refused on CPU: {why}, 7-15x slower than "
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
        yield resolved
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


def describe(precision: str) -> dict[str, Any]:
    """The environment a run's numbers came from (the summary's ``environment``); ``precision``: the one
    the run trains in (:func:`pinned`)."""
    cuda = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "lightning": lightning.__version__,
        "device": torch.cuda.get_device_name(0) if cuda else cpu_isa.model(),
        # what repro pinned: avx2, or none (native, or a CPU the pin does not apply to)
        "cpu_isa": cpu_isa.pin(cpu_isa.applied() or cpu_isa.DEFAULT, {}),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the kernels torch runs: AVX2, AVX512, ...
        "cpu_vendor": cpu_isa.vendor(),  # AuthenticAMD, GenuineIntel: MKL picks its GEMM kernels per vendor
        "blas": blas(),  # the CPU GEMMs' library and version: MKL 2024.2, ...
        "threads": torch.get_num_threads(),
        "precision": precision,  # auto: what it resolved to here
    }


def blas() -> str:
    """The library torch's CPU build does its float32 GEMMs in, with its version where the build names
    it (``MKL 2024.2``; else the build's ``BLAS_INFO``: ``open``, ``accelerate``, ...; ``unknown``). Read
    from the build's configuration text (``torch.__config__.show()``: no work, no kernel chosen)."""
    shown = torch.__config__.show()
    found = re.search(r"Math Kernel Library Version (\d[\d.]*)", shown)
    if found:
        return f"MKL {found.group(1)}"
    info = re.search(r"BLAS_INFO=([\w.-]+)", shown)
    return info.group(1) if info else "unknown"
