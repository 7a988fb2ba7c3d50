"""The CPU instruction set that torch, MKL and oneDNN may use in a run, applied where the run starts.

A float32 run's bits depend on the kernels the libraries pick for the CPU they find: on an AVX-512 CPU
MKL's GEMMs, oneDNN and torch's vectorised loops add in another order than on an AVX2 one, and two
machines that both call themselves "AMD EPYC" can differ so. Measured on 2026-12-02: the tiny
st-table1-cifar10 strided seed 1 (run 79caa3e9cb07, code c0c49a8), trained again on an AVX-512 EPYC,
leaves the stored run (from an AVX2 EPYC) at step 39 (train bits 4.748167 against 4.748174); with the
AVX2 pin it gives the stored run bit for bit. The pin costs an AVX-512 CPU 1.15-1.6x on fp32 training
steps and makes bf16 unusable (about 1 GFLOP/s), so new runs are native and the pin is opt-in.

The instruction set of a run (:func:`for_run`):

- a run that recorded one (its summary's ``environment``, written when it started) is resumed or
  re-executed with it (:func:`recorded`): ``avx2`` where repro pinned it, else ``native``;
- a new run takes ``REPRO_CPU_ISA``: ``native`` (the default: the libraries choose, as the caller's
  ``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA`` say) or ``avx2`` (every
  x86-64 CPU with AVX2 runs the AVX2 kernels, whatever those variables said: the bits of the runs
  stored under the pin); unset, a process that already applied one for a resumed run keeps it.

The libraries choose their kernels once per process, at the first vectorised operation, so
:func:`apply` must come before any tensor work, and a process keeps what it applied first (a later run
that needs the other set is refused in one line, naming how to run it alone). Off x86-64, or on a CPU
without AVX2, the pin applies nothing. A run's summary records what was pinned and what torch then runs
(``environment.cpu_isa``: ``avx2`` or ``none``; ``environment.cpu_capability``: ``AVX2``, ``AVX512``, ...),
and the CPU's vendor (``environment.cpu_vendor``, :func:`vendor`): the pin holds the instruction set, not
MKL's choice of GEMM kernels per vendor, so an Intel and an AMD CPU differ in the last bits under it too
(docs/reproducibility.md). Importing this module changes nothing.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from repro.errors import UserError

CHOICES = ("native", "avx2")
DEFAULT = "native"
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
_applied: dict[str, str] = {}  # this process's: {"isa": native|avx2, "capability": what torch then ran}


def choice(environ: Mapping[str, str] = os.environ) -> str:
    """``REPRO_CPU_ISA`` (default ``native``), checked: another value is a one-line error."""
    wanted = environ.get("REPRO_CPU_ISA", DEFAULT).strip().lower()
    if wanted not in CHOICES:
        raise UserError(
            f"REPRO_CPU_ISA: {wanted!r} is not an instruction-set choice; expected one of {', '.join(CHOICES)}"
        )
    return wanted


def recorded(environment: Mapping | None) -> str | None:
    """The instruction set a stored run trained with, from its summary's ``environment``: ``avx2`` where
    repro pinned it, ``native`` otherwise (runs stored before the pin existed record no ``cpu_isa``:
    they ran natively); None for a run that never started (no environment)."""
    if not environment:
        return None
    return "avx2" if environment.get("cpu_isa") == "avx2" else "native"


def for_run(environment: Mapping | None, environ: Mapping[str, str] = os.environ) -> str:
    """The instruction set a run trains with (the module docstring's rule)."""
    stored = recorded(environment)
    if stored is not None:
        return stored
    if "REPRO_CPU_ISA" not in environ and _applied:
        return _applied["isa"]
    return choice(environ)


def pin(isa: str, environ: MutableMapping[str, str] = os.environ, flags: set[str] | None = None) -> str:
    """Set the libraries' variables for ``isa``; returns what a summary records as pinned: ``avx2``, or
    ``none`` (``native``, or a CPU the pin does not apply to: not x86-64, or without AVX2)."""
    if isa != "avx2" or platform.machine().lower() not in ("x86_64", "amd64"):
        return "none"
    if "avx2" not in (cpu_flags() if flags is None else flags):
        return "none"
    environ.update(AVX2)
    return "avx2"


def apply(isa: str, run: str = "this run") -> str:
    """Make this process's kernels ``isa`` (before its first tensor operation; a second call with the
    same set is free) and return what was pinned (``avx2`` / ``none``). A process whose kernels were
    chosen otherwise is refused, one line, since ``run``'s bits would not be the recorded ones."""
    import torch

    if _applied and _applied["isa"] != isa:
        raise UserError(
            f"{run} trains with REPRO_CPU_ISA={isa}, but this process already runs {_applied['isa']} kernels "
            f"(the libraries choose once per process): run it alone, e.g. `REPRO_CPU_ISA={isa} repro run "
            "NAME --run-id ID`"
        )
    pinned = pin(isa)
    capability = torch.backends.cpu.get_cpu_capability()  # decided here, if nothing decided it before
    if pinned == "avx2" and capability not in ("AVX2", "DEFAULT"):
        raise UserError(
            f"REPRO_CPU_ISA=avx2 for {run}, but torch already runs {capability} kernels in this process "
            "(a tensor operation ran before the run started): start a fresh process, or set REPRO_CPU_ISA=native"
        )
    _applied.update(isa=isa, capability=capability)
    return pinned


def applied() -> str | None:
    """The instruction set this process applied (None: none yet)."""
    return _applied.get("isa")


def bf16_refusal(environ: Mapping[str, str] = os.environ) -> str | None:
    """Why this process's CPU kernels cannot run bf16 matrix products at speed (None: they can, natively
    on a CPU with AVX-512). Measured: under the AVX2 pin, or on a CPU without AVX-512, a bf16 GEMM runs a
    fallback at about 1 GFLOP/s, and a bf16 training step is 7-15x slower than float32."""
    if pin(_applied.get("isa", DEFAULT), dict(environ)) == "avx2":
        return "the AVX2 kernels (REPRO_CPU_ISA=avx2, or a run recorded under that pin) run bf16 at about 1 GFLOP/s"
    if "avx512" not in features().split():
        return f"this CPU ({model()}: {features()}) has no AVX-512, so bf16 runs a fallback at about 1 GFLOP/s"
    return None


def bf16_fast(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process's CPU kernels run bf16 matrix products in hardware: native kernels on a CPU with
    AVX-512 BF16 or AMX, where ``train.precision: auto`` trains in bf16-mixed (repro/train/environment.py).
    Plain AVX-512 runs bf16 (:func:`bf16_refusal` allows it) by converting to float32: not counted fast."""
    units = features().split()
    return bf16_refusal(environ) is None and ("avx512_bf16" in units or "amx" in units)


def model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; the platform's word for it elsewhere). Not enough to tell
    two machines' kernels apart: "AMD EPYC" has named CPUs with and without AVX-512 here."""
    return _cpuinfo("model name") or platform.processor() or platform.machine() or "unknown"


VENDORS = {"AMD": "AuthenticAMD", "Intel": "GenuineIntel"}  # a model name's first word -> its vendor_id


def vendor() -> str:
    """The CPU's vendor as ``/proc/cpuinfo`` names it (``vendor_id``: ``AuthenticAMD``, ``GenuineIntel``;
    ``unknown`` where it cannot be read). It decides bits beside the instruction set: MKL dispatches its
    GEMM kernels per vendor, and its AVX2 pin does not make an Intel and an AMD CPU run the same ones."""
    return _cpuinfo("vendor_id") or "unknown"


def vendor_of(model_name: str | None) -> str | None:
    """The vendor a CPU model name implies (``AMD EPYC`` -> ``AuthenticAMD``, ``Intel(R) Xeon(R) ...`` ->
    ``GenuineIntel``; None for another name, a GPU's among them): for runs stored before the vendor was
    recorded, whose ``environment.device`` is the model name."""
    first = (model_name or "").split(" ", 1)[0].split("(", 1)[0]
    return VENDORS.get(first)


def features() -> str:
    """The CPU's widest vector and matrix units, as the libraries' native kernels would use them
    (``avx512 avx512_bf16 amx``, ``avx2``, ...; ``unknown`` where the flags cannot be read): what
    tells two machines of one model name apart."""
    flags = cpu_flags()
    found = [
        name
        for name, needs in (
            ("avx512", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}),
            ("avx512_bf16", {"avx512_bf16"}),
            ("amx", {"amx_bf16", "amx_tile"}),
        )
        if needs <= flags
    ]
    return " ".join(found) or ("avx2" if "avx2" in flags else "unknown" if not flags else "sse")


def cpu_flags() -> set[str]:
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
