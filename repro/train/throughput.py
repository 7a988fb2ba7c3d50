"""Achieved model FLOP/s and MFU (model FLOPs utilisation) of a training step, against the peak of the
device it ran on, and the machine's load while it ran (docs/throughput.md).

Model FLOP/s = 3 x forward FLOPs per predicted token x predicted tokens per step / seconds per step.
The forward count is the model's analytic one (``model.flops_per_token()``: matrix products only, 2
FLOPs per multiply-accumulate; sparse attention at the keys its pattern allows, an adaptive span at
its effective spans), so MFU measures useful work, not what a kernel happens to compute. The 3 is the
forward plus a backward of twice its FLOPs (gradients for inputs and for weights); recomputation
(checkpointing), the optimizer, softmax and norms are not counted.

Peaks: a known GPU from :data:`GPU_PEAKS` (vendor dense peaks, no structured sparsity); any other device
measured with a square GEMM in the run's compute dtype (:func:`measure_peak`, the best of a few repeats)
and cached once per machine (:func:`cache_path`: the user's cache folder, or the file ``$REPRO_PEAK_CACHE``
names), keyed by the machine's identity (a hash of its host name and machine id), the CPU model and its vector units
(``cpu_isa.features()``: one model name covers CPUs with and without AVX-512), torch's thread count and
torch's version. On a CPU the peak is always the libraries' native kernels', measured in a fresh process
(``REPRO_CPU_ISA=native``, the libraries' own variables cleared), whatever the run pinned: MFU says what
share of the hardware a step used, so a run under the AVX2 pin reads lower, not the same (``peak_kernels``
names the kernels the peak was measured with). A peak measured while others load the machine is low (MFU
then reads high), and no GEMM runs faster than the hardware, so the cache keeps the **highest** peak seen,
with the load average it was measured at and how many measurements it is the best of; the first run that
finds the machine quieter (a load average at least :data:`LOAD_SLACK` lower) measures again, one process at
a time (a lock beside the cache: parallel jobs do not measure under each other's load), and so does a run
whose MFU would exceed 1. An MFU still above 1 is stored as it is and flagged (:data:`ABOVE_PEAK`: the
run's line, ``repro status``); ``python -m repro.train.throughput --measure`` measures again.

Whether a run had the machine to itself (``ran_alone``, which timing claims require) is read from CPU
time, not the load average: over each sampled interval, the machine's busy CPU time less the run's own
(:func:`others_cores`), the hypervisor's steal included (:func:`steal_cores`, recorded apart as
``steal_cores_max``: a virtual machine whose host is busy shares its cores without any process here).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from repro import cpu_isa
from repro.errors import StoreError
from repro.files import atomic
from repro.files.locks import FileLock

CONVENTION = (
    "3 x analytic forward FLOPs per predicted token (matrix products, 2 per MAC; sparse attention at its "
    "allowed keys, adaptive span at its effective spans) x tokens per step / median seconds per step; "
    "the 3 = forward + backward (2x forward); recomputation, optimizer, softmax and norms not counted"
)
BACKWARD_FACTOR = 3.0
GEMM_SIZE = 2048
# Dense peaks in FLOP/s from the vendors' data sheets (tensor cores without structured sparsity):
# name fragment (checked in order) -> {dtype: peak}. fp32 = plain fp32 (no TF32).
GPU_PEAKS: list[tuple[str, dict[str, float]]] = [
    ("H200", {"bf16": 989e12, "fp16": 989e12, "tf32": 495e12, "fp32": 67e12}),
    ("H100 PCIe", {"bf16": 756e12, "fp16": 756e12, "tf32": 378e12, "fp32": 51e12}),
    ("H100", {"bf16": 989e12, "fp16": 989e12, "tf32": 495e12, "fp32": 67e12}),
    ("A100", {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12}),
    ("V100", {"fp16": 125e12, "fp32": 15.7e12}),  # no bf16 or tf32 units
]
CACHE = Path("repro") / "peak-flops.json"  # under the user's cache folder ($XDG_CACHE_HOME, ~/.cache)
LOAD_SLACK = 1.0  # a cached peak measured at a load this much above today's is measured again
PEAK_CACHE = "REPRO_PEAK_CACHE"  # another peak cache file (the tests share one per session)
ABOVE_PEAK = (
    "MFU above 1: the machine's peak it was divided by was measured under more load than the run had, so it is "
    "too low; "
    "`python -m repro.train.throughput --measure` on an idle machine measures it again (docs/throughput.md)"
)


def compute_dtype(precision: str, device_type: str) -> str:
    """The dtype a run's matrix products use: ``bf16``, ``fp16``, ``tf32`` or ``fp32``."""
    precision = str(precision)
    if precision.startswith("bf16"):
        return "bf16"
    if precision.startswith("16"):
        return "fp16"
    if device_type == "cuda":
        import torch

        return "tf32" if torch.get_float32_matmul_precision() != "highest" else "fp32"
    return "fp32"


def machine() -> str:
    """This machine's identity: ``machine <8 hex digits>``, a hash of its host name and machine id
    (``/etc/machine-id``, where the system has one), so that a cache file in a home folder shared by
    several machines keeps each one's peak apart, and a summary that records the key names no host."""
    try:
        machine_id = Path("/etc/machine-id").read_text().strip()
    except OSError:
        machine_id = ""
    return "machine " + hashlib.sha256(f"{socket.gethostname()} {machine_id}".encode()).hexdigest()[:8]


def device_key(device_type: str, threads: int) -> str:
    """What a measured peak is valid for: the machine, its processor (a CPU's model and vector units, or the
    GPU's name), torch's threads and torch's version."""
    import torch

    name = torch.cuda.get_device_name(0) if device_type == "cuda" else f"{cpu_isa.model()} [{cpu_isa.features()}]"
    return f"{machine()} | {name} | {threads} threads | torch {torch.__version__}"


def cache_path() -> Path:
    """The peak cache of this user on this machine: ``$REPRO_PEAK_CACHE``, else ``$XDG_CACHE_HOME/repro/
    peak-flops.json`` (``~/.cache/repro/peak-flops.json``)."""
    if os.environ.get(PEAK_CACHE):
        return Path(os.environ[PEAK_CACHE])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / CACHE


def table_peak(device_name: str, dtype: str) -> float | None:
    """A known GPU's peak for ``dtype`` (None: not in the table)."""
    for fragment, peaks in GPU_PEAKS:
        if fragment.lower() in device_name.lower():
            return peaks.get(dtype)
    return None


def measure_peak(device_type: str, dtype: str, threads: int, size: int = GEMM_SIZE, repeats: int = 5) -> dict:
    """``{"flops_per_second", "kernels"}``: the best of ``repeats`` square matrix products in ``dtype``
    (after a warm-up) on ``threads`` torch threads, ``size`` wide, or narrower where a 256-wide product
    shows the machine would take more than about 0.2 s for one (bf16 on a CPU without AVX-512 runs a slow
    fallback at well under 1 GFLOP/s: a 2048-wide product there takes a minute). On a CPU in a fresh
    process with native kernels (the module docstring); ``kernels`` names them."""
    if device_type != "cuda":
        env = {k: v for k, v in os.environ.items() if k not in cpu_isa.AVX2}
        command = [sys.executable, "-m", "repro.train.throughput", "--gemm", dtype, *map(str, (threads, size, repeats))]
        proc = subprocess.run(command, capture_output=True, text=True, env={**env, "REPRO_CPU_ISA": "native"})
        if proc.returncode != 0:
            raise RuntimeError(f"the native GEMM peak: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])
    return {"flops_per_second": _best_gemm(device_type, dtype, threads, size, repeats), "kernels": "cuda"}


def _best_gemm(device_type: str, dtype: str, threads: int, size: int = GEMM_SIZE, repeats: int = 5) -> float:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rough = _gemm(device_type, dtype, 256, 1)
        fits = int((0.2 * rough / 2) ** (1 / 3)) // 128 * 128
        return max(rough, _gemm(device_type, dtype, max(256, min(size, fits)), repeats))
    finally:
        torch.set_num_threads(before)


def _gemm(device_type: str, dtype: str, size: int, repeats: int) -> float:
    import torch

    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)
    dev = torch.device("cuda" if device_type == "cuda" else "cpu")
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=g).to(dev, torch_dtype) for _ in range(2))
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.mm(a, b)
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        sync()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best


def peak(device_type: str, precision: str, threads: int | None = None, remeasure: bool = False) -> dict:
    """``{"peak_flops_per_second", "peak_source", "peak_kernels", "compute_dtype"}`` for this machine on
    ``threads`` torch threads (default: torch's current number), see the module docstring; a measured peak
    is cached per machine, the highest seen kept."""
    import torch

    threads = threads or torch.get_num_threads()
    dtype = compute_dtype(precision, device_type)
    if device_type == "cuda":
        name = torch.cuda.get_device_name(0)
        known = table_peak(name, dtype)
        if known is not None:
            return {
                "peak_flops_per_second": known,
                "peak_source": f"table: {name} {dtype}",
                "peak_kernels": "cuda",
                "compute_dtype": dtype,
            }
    key = f"{device_key(device_type, threads)} | {dtype}"
    path = cache_path()
    try:
        with FileLock(path.with_name(path.name + ".lock"), wait=True):  # one measurement at a time
            entry, kept = _cached(path, key, device_type, dtype, threads, remeasure), ""
    except StoreError as err:  # a cache folder that cannot be written (a read-only home): this run's own
        entry, kept = _measured(device_type, dtype, threads), f"; not cached: {err}"
    times = entry.get("measurements", 1)
    best = f"the highest of {times} measurements, " if times > 1 else ""
    source = f"measured {entry['gemm']} ({key}; {best}load {entry['load_average']} at {entry['measured']}{kept})"
    return {
        "peak_flops_per_second": entry["flops_per_second"],
        "peak_source": source,
        "peak_kernels": entry.get("kernels", "unknown"),
        "compute_dtype": dtype,
    }


def _cached(path: Path, key: str, device_type: str, dtype: str, threads: int, remeasure: bool) -> dict:
    """The cache's entry for ``key``, measured (and the highest kept) where there is none, where asked, or
    where the load now is lower than the best's by :data:`LOAD_SLACK`."""
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    entry = cache.get(key)
    quieter = entry is not None and entry.get("load_average", 0) > os.getloadavg()[0] + LOAD_SLACK
    if entry is None or remeasure or quieter:  # a peak measured under more load than now is low: redone
        entry = _highest(entry, _measured(device_type, dtype, threads))
        atomic.write_text(path, json.dumps({**cache, key: entry}, indent=2) + "\n")
    return entry


def _measured(device_type: str, dtype: str, threads: int) -> dict:
    """One measurement, with what it was and the load and time it was made at."""
    return {
        **measure_peak(device_type, dtype, threads),
        "gemm": f"square {dtype} GEMM up to {GEMM_SIZE} wide, best of 5",
        "load_average": round(os.getloadavg()[0], 2),
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _highest(entry: dict | None, measured: dict) -> dict:
    """The cache entry after a measurement: the higher peak of the two (with its own load and time), and
    how many measurements it is the best of."""
    times = (entry or {}).get("measurements", 1 if entry else 0) + 1
    best = measured if entry is None or measured["flops_per_second"] >= entry["flops_per_second"] else entry
    return {**best, "measurements": times}


def achieved(flops_per_token: float, tokens_per_step: float, seconds_per_step: float, peak_flops: float) -> dict:
    """Model FLOP/s and MFU of a step (the formula in the module docstring)."""
    rate = BACKWARD_FACTOR * flops_per_token * tokens_per_step / seconds_per_step
    return {"model_flops_per_second": rate, "mfu": rate / peak_flops}


def summary_fields(
    device_type: str,
    precision: str,
    flops_per_token,
    tokens_per_step,
    seconds_per_step,
    devices: int = 1,
    threads: int | None = None,
) -> dict:
    """The throughput keys of a run's summary or a bench record (empty without a measured step time).
    ``devices``: the GPUs the step ran on (the peak scales with them). An MFU above 1 means the cached peak
    is low (measured under load): it is measured again (the higher kept) before the MFU is stored."""
    if not seconds_per_step or not flops_per_token:
        return {}
    for remeasure in (False, True):
        found = peak(device_type, precision, threads, remeasure=remeasure)
        total = found["peak_flops_per_second"] * devices
        rates = achieved(flops_per_token, tokens_per_step, seconds_per_step, total)
        if rates["mfu"] <= 1:
            break
    return {**rates, **found, "peak_flops_per_second": total, "flops_convention": CONVENTION}


def bench_fields(record: dict) -> dict:
    """:func:`summary_fields` of a training-step bench record (``repro bench st-step`` / ``adaptive``:
    ``batch`` sequences of ``n`` or ``block`` tokens)."""
    tokens = record.get("batch", 0) * (record.get("n") or record.get("block") or 0)
    device = "cuda" if str(record.get("device", "cpu")).startswith("cuda") else "cpu"
    precision = "bf16-mixed" if record.get("precision") == "bf16" else "32-true"
    fields = summary_fields(
        device,
        precision,
        record.get("flops_per_token"),
        tokens,
        record.get("seconds_per_step"),
        threads=record.get("threads") or None,
    )
    fields.pop("flops_convention", None)  # the bench's docs give it once, not every record
    return fields


ALONE_SLACK = 0.5  # cores that other processes may keep busy while a run still counts as alone


def cpu_sample() -> tuple[float, float, float, float] | None:
    """(wall seconds, CPU seconds the whole machine has spent busy, CPU seconds this process and its
    descendants have spent: every thread, a W&B service, a data-loader worker, the children they reaped,
    CPU seconds stolen by the hypervisor), or None where the machine's CPU time cannot be read (no
    ``/proc``). Busy counts the steal: on a virtual machine whose host runs other guests the run's cores
    were not its own then, so its step times are not the machine's (:func:`steal_cores` says how much)."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in first[1:9])
    ticks = os.sysconf("SC_CLK_TCK")
    busy = (user + nice + system + irq + softirq + steal) / ticks
    return time.perf_counter(), busy, _tree_ticks(os.getpid()) / ticks, steal / ticks


def _tree_ticks(root: int) -> int:
    """utime + stime + cutime + cstime (``proc(5)``) summed over ``root`` and its live descendants."""
    children: dict[int, list[int]] = {}
    spent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:  # it exited meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()  # from field 3 (state) on: the name may hold spaces
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        spent[pid] = sum(int(x) for x in fields[11:15])
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += spent.get(pid, 0)
        stack += children.get(pid, [])
    return total


def others_cores(before: tuple[float, ...], after: tuple[float, ...], processes: int = 1) -> float:
    """How many cores other processes kept busy between two :func:`cpu_sample` s: the machine's busy CPU
    time less the run's own (its process tree; ``processes`` ranks alike, each measured by its own
    sample), per wall second. Unlike the 1-minute load average it neither lags (a run started right after
    another job ended is not charged with it) nor guesses how many of the run's threads are busy."""
    wall = after[0] - before[0]
    if wall <= 0:
        return 0.0
    return max(0.0, ((after[1] - before[1]) - processes * (after[2] - before[2])) / wall)


def steal_cores(before: tuple[float, ...], after: tuple[float, ...]) -> float:
    """Of :func:`others_cores`, the cores the hypervisor gave other guests between two :func:`cpu_sample` s
    (``/proc/stat``'s steal), per wall second: a run that shared the machine with no process of its own."""
    wall = after[0] - before[0]
    return max(0.0, (after[3] - before[3]) / wall) if wall > 0 else 0.0


def ran_alone(others_max: float | None) -> bool | None:
    """Whether no sampled interval of a run had other processes keeping more than :data:`ALONE_SLACK` of
    a core busy; None without samples (a run stored before they were taken, or no ``/proc/stat``)."""
    if others_max is None:
        return None
    return bool(others_max <= ALONE_SLACK)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m repro.train.throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--measure", action="store_true", help="measure again (on an idle machine); the highest is kept"
    )
    parser.add_argument("--gemm", nargs=4, metavar=("DTYPE", "THREADS", "SIZE", "REPEATS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.gemm:  # measure_peak's fresh process: native kernels, one JSON line
        import torch

        cpu_isa.apply("native", "the GEMM peak")
        rate = _best_gemm("cpu", args.gemm[0], *map(int, args.gemm[1:]))
        print(json.dumps({"flops_per_second": rate, "kernels": f"native {torch.backends.cpu.get_cpu_capability()}"}))
        return 0
    for precision in ("32-true", "bf16-mixed"):
        found = peak(args.device, precision, remeasure=args.measure)
        print(f"{found['compute_dtype']}: {found['peak_flops_per_second'] / 1e9:.1f} GFLOP/s ({found['peak_source']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
