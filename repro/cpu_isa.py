"""The CPU instruction set that torch, MKL and oneDNN may use, pinned before torch is first imported.

A float32 run's bits depend on the kernels the libraries pick for the CPU they find: on an AVX-512 CPU
MKL's GEMMs, oneDNN and torch's vectorised loops add in another order than on an AVX2 one, and two
machines that both call themselves "AMD EPYC" can differ so. Measured on 2026-12-02: the tiny
st-table1-cifar10 strided seed 1 (run 79caa3e9cb07, code c0c49a8), trained again on an AVX-512 EPYC,
leaves the stored run (from an AVX2 EPYC) at step 39 (train bits 4.748167 against 4.748174); with the
AVX2 pin below it gives the stored run bit for bit.

``REPRO_CPU_ISA`` chooses:

- ``avx2`` (the default): every x86-64 CPU with AVX2 runs the AVX2 kernels, whatever
  ``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS`` or ``ONEDNN_MAX_CPU_ISA`` said;
- ``native``: the libraries choose (those variables as the caller set them): faster on some AVX-512
  CPUs, with that CPU family's bits.

Off x86-64, or on a CPU without AVX2, nothing is pinned. A run's summary records the choice and what
torch then reports (``environment.cpu_isa``, ``environment.cpu_capability``); a value that is neither
stops a run with a one-line error (repro.train.environment).
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping
from pathlib import Path

CHOICES = ("avx2", "native")
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def choice(environ: MutableMapping[str, str] = os.environ) -> str:
    return environ.get("REPRO_CPU_ISA", "avx2").strip().lower()


def pin(environ: MutableMapping[str, str] = os.environ, flags: set[str] | None = None) -> str:
    """Set the libraries' variables for :func:`choice`; returns what was pinned: ``avx2``, or ``none``
    (``native``, an unknown value, or a CPU the pin does not apply to)."""
    if choice(environ) != "avx2" or platform.machine().lower() not in ("x86_64", "amd64"):
        return "none"
    if "avx2" not in (_flags() if flags is None else flags):
        return "none"
    environ.update(AVX2)
    return "avx2"


def model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; the platform's word for it elsewhere). Not enough to tell
    two machines' kernels apart: "AMD EPYC" has named CPUs with and without AVX-512 here."""
    return _cpuinfo("model name") or platform.processor() or platform.machine() or "unknown"


def _flags() -> set[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where it cannot be read)."""
    return set(_cpuinfo("flags").split())


def _cpuinfo(key: str) -> str:
    """The first ``key`` line's value in ``/proc/cpuinfo`` ("" where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.partition(":")[0].strip() == key:
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""
