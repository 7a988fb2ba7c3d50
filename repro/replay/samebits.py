"""Whether a stored run, trained again here with this code, can give its stored bits, and why not.

Same spec, same ``code_version`` and same environment give the same bits (docs/reproducibility.md). What is
known before anything trains to break that: the run was trained from uncommitted code (``+dirty``: no
commit holds it), on another CPU vendor (MKL picks its GEMM kernels per vendor), with another torch, or on
native kernels this CPU does not have. :func:`reasons` names those; :func:`unexplained` says what is left
when none applies and the bits still differ (another commit of the code, an environment not recorded).
``repro sample``, ``repro run --retrain-checkpoint`` and a run trained into another root beside a stored
run of the same id (the Quick start's) say them in their lines.
"""

from __future__ import annotations

from collections.abc import Mapping

from repro import cpu_isa
from repro.replay import verify

SCORES = ("valid_bits", "test_bits")


def this_machine() -> dict:
    """This machine's environment as a summary records it, as far as it decides bits before training."""
    return {"cpu_vendor": cpu_isa.vendor(), "device": cpu_isa.model(), "torch": verify.torch_version()}


def reasons(spec: Mapping, summary: Mapping, here: Mapping | None = None) -> list[str]:
    """Why a run trained again in the environment ``here`` (a summary's ``environment``; default: this
    machine, :func:`this_machine`) with this code is not expected to give the stored run's bits (its
    ``spec.yaml`` and ``summary.json`` as read), each in words; empty when nothing known rules them out."""
    said = []
    version = str(spec.get("code_version") or "")
    if version.endswith("+dirty"):
        said.append(f"it was trained from uncommitted code, code_version {version}, which no commit holds")
    stored = summary.get("environment") or {}
    here = dict(here if here is not None else this_machine())
    vendor, inferred = verify.recorded_vendor(stored)
    if vendor and here.get("cpu_vendor") not in (None, "unknown", vendor):
        how = ", the vendor inferred from that name" if inferred else ""
        said.append(
            f"it was trained on {vendor} ({stored.get('device', 'unknown')}{how}), this CPU is "
            f"{here['cpu_vendor']} ({here.get('device', 'unknown')}): MKL picks its GEMM kernels per CPU vendor"
        )
    if stored.get("torch") and here.get("torch") and stored["torch"] != here["torch"]:
        said.append(f"it was trained with torch {stored['torch']}, this is torch {here['torch']}")
    if stored.get("cpu_isa") == "none" and stored.get("cpu_capability"):
        kernels = here.get("cpu_capability") or verify.native_capability()
        if kernels != stored["cpu_capability"]:
            said.append(f"it ran the libraries' own {stored['cpu_capability']} kernels, this CPU's are {kernels}")
    return said


def unexplained(spec: Mapping, summary: Mapping, here_version: str) -> str:
    """What may still move the bits when :func:`reasons` names nothing: the code's commit, or an
    environment the run did not record; and the command that re-executes it at its own commit."""
    version = spec.get("code_version") or "unknown"
    said = []
    if version != here_version:
        said.append(
            f"it was trained at code {version}, this is {here_version}: a code change that reorders sums moves the last bits"
        )
    if not summary.get("environment"):
        said.append("it records no environment to compare with")
    run_id = spec.get("run_id", "ID")
    return "; ".join(said or ["no recorded difference of code or environment explains it"]) + (
        f" (`repro verify {run_id}` re-executes it at its own commit)"
    )


def scores(summary: Mapping) -> dict[str, float]:
    """The scored splits of a summary: ``{"valid_bits": ..., "test_bits": ...}`` (those it has)."""
    return {key: float(summary[key]) for key in SCORES if summary.get(key) is not None}


def differences(stored: Mapping, again: Mapping, tolerance: float = 0.0) -> dict[str, tuple[float, float | None]]:
    """The scores of ``again`` that differ from the stored ones by more than ``tolerance`` bits: key ->
    (stored, again); a score ``again`` lacks counts as different."""
    out = {}
    for key, old in scores(stored).items():
        new = again.get(key)
        if new is None or abs(old - float(new)) > tolerance:
            out[key] = (old, None if new is None else float(new))
    return out


def shown(off: Mapping[str, tuple[float, float | None]]) -> str:
    """``valid_bits 2.518111 (stored 2.518025), ...``."""
    return ", ".join(
        f"{key} {'none' if new is None else f'{new:.6f}'} (stored {old:.6f})" for key, (old, new) in off.items()
    )
