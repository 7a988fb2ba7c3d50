"""Shared by the benchmarks that compare cases against a baseline: interleaved timing, paired speed-ups,
and peak memory from a fresh process.

Timing interleaves the cases round by round (baseline, case 1, case 2, baseline, ...) after one warm-up
of each, so a shared machine's load drifts over all of them alike; a case's speed-up is the median over
rounds of baseline time / case time in the same round.

Peak memory (:mod:`repro.train.memory`) on CPU: a fresh process per case (``python -m MODULE --worker``) whose
large allocations come straight from mmap and go back on free (``MALLOC_MMAP_THRESHOLD_``), so its
resident set follows live tensors; the peak is ``VmHWM`` after the measured call minus the resident set
just before it. On CUDA, in-process: the maximum allocation minus the allocation just before it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from repro import cpu_isa


def interleaved(
    fns: dict[str, Callable[[], None]],
    repeats: int,
    sync: Callable[[], None] = lambda: None,
    errors: dict[str, str] | None = None,
    cpu: dict[str, list[float]] | None = None,
    warmup: int = 1,
    after_round: Callable[[], None] | None = None,
) -> dict[str, list[float]]:
    """Seconds of each function per round: ``warmup`` untimed rounds (one call of each, in turn), then
    ``repeats`` timed rounds in turn. A function that raises is dropped (its message goes to ``errors``).
    ``cpu`` receives the process's CPU seconds per round (all threads: on a loaded CPU a steadier measure
    of the work than wall time); ``after_round`` is called after each round, warm-up ones included,
    outside the timing (a :class:`Load` mark)."""
    live = dict(fns)
    for _ in range(warmup):
        for name, fn in list(live.items()):
            try:
                fn()
                sync()
            except Exception as err:  # one failing case (e.g. out of memory) must not lose the others
                if errors is None:
                    raise
                errors[name] = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"
                del live[name]
        if after_round is not None:
            after_round()
    times: dict[str, list[float]] = {name: [] for name in live}
    for _ in range(repeats):
        for name, fn in live.items():
            sync()
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            sync()
            times[name].append(time.perf_counter() - t0)
            if cpu is not None:
                cpu.setdefault(name, []).append(time.process_time() - c0)
        if after_round is not None:
            after_round()
    return times


class Load:
    """The machine's load while a benchmark runs, from marks taken between its phases: the cores other
    processes kept busy over each interval (:func:`repro.train.throughput.others_cores`: the machine's busy
    CPU time, the hypervisor's steal included, less this process tree's), and the 1-minute load average at
    each mark. :meth:`summary` splits the intervals at the ``timed`` mark: before it set-up and warm-up,
    after it the timed rounds; the machine was idle when no interval had others above
    :data:`repro.train.throughput.ALONE_SLACK` cores (``ran_alone``, the training runs' test)."""

    def __init__(self) -> None:
        self.samples: list[tuple | None] = []
        self.averages: list[float] = []
        self.timed: int | None = None  # the index of the mark the timed rounds start at

    def mark(self, timed: bool = False) -> None:
        from repro.train import throughput

        if timed:
            self.timed = len(self.samples)
        self.samples.append(throughput.cpu_sample())
        self.averages.append(round(os.getloadavg()[0], 2))

    def summary(self) -> dict:
        from repro.train import throughput

        pairs = list(zip(self.samples, self.samples[1:]))
        others = [throughput.others_cores(a, b) if a and b else None for a, b in pairs]
        steal = [throughput.steal_cores(a, b) if a and b else None for a, b in pairs]
        split = self.timed if self.timed is not None else 0
        before, during = [o for o in others[:split] if o is not None], [o for o in others[split:] if o is not None]
        every = before + during
        return {
            "load_average_before": self.averages[0] if self.averages else None,
            "load_average_after": self.averages[-1] if self.averages else None,
            "others_cores_before_max": round(max(before), 3) if before else None,
            "others_cores_during_max": round(max(during), 3) if during else None,
            "others_cores_during_mean": round(statistics.fmean(during), 3) if during else None,
            "steal_cores_max": round(max(s for s in steal if s is not None), 3) if every else None,
            "idle": throughput.ran_alone(max(every) if every else None),
            "idle_rule": f"no interval (set-up and warm-up, then every timed round) had other processes "
            f"keeping more than {throughput.ALONE_SLACK} of a core busy",
        }


def paired_speedup(base: list[float], times: list[float]) -> float | None:
    """Median over rounds of base / case (None without rounds)."""
    return statistics.median(b / t for b, t in zip(base, times)) if times else None


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def run_worker(module: str, payload: dict, env: dict | None = None):
    """``python -m module --worker JSON`` in a fresh process (OMP_WAIT_POLICY=PASSIVE unless set: on a
    shared CPU spinning OpenMP barriers make every parallel region cost a time slice); its last stdout
    line parsed as JSON, or ``{"error": ...}``."""
    env = dict(os.environ if env is None else env)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    proc = subprocess.run(
        [sys.executable, "-m", module, "--worker", json.dumps(payload)], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def worker_main(worker: Callable[[dict], dict]) -> None:
    """A worker process's entry (``python -m MODULE --worker JSON``): the instruction set applied before
    its first tensor operation (``REPRO_CPU_ISA``, native by default: repro/cpu_isa.py), then
    ``worker(payload)`` printed as one JSON line, with the kernels it ran (``kernels``: ``native AVX512``,
    ``avx2 AVX2``, ...)."""
    import torch

    cpu_isa.apply(cpu_isa.choice(), "the benchmark")
    out = worker(json.loads(sys.argv[2]))
    print(json.dumps({**out, "kernels": f"{cpu_isa.applied()} {torch.backends.cpu.get_cpu_capability()}"}))


def memory_env() -> dict:
    return {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 16)}


def csv_of(kind: type) -> Callable[[str], list]:
    """An argparse type: comma-separated values of ``kind``."""
    return lambda s: [kind(x) for x in s.split(",") if x]


def add_pattern_arguments(parser: argparse.ArgumentParser, combines: list[str], repeats: int) -> None:
    """The options both Sparse Transformer benches take: the patterns and their geometry, the timing
    rounds, the device and threads, and a JSONL file the records are appended to."""
    parser.add_argument(
        "--patterns",
        type=csv_of(str),
        default=["strided", "fixed"],
        help="comma-separated; dense is always measured as the baseline",
    )
    parser.add_argument("--stride", type=int, default=128, help="l (block length / stride)")
    parser.add_argument("--c", type=int, default=16, help="summary positions per block (fixed)")
    parser.add_argument(
        "--combine", default="merged", choices=combines, help="how the two halves of a factorised pattern combine"
    )
    parser.add_argument("--repeats", type=int, default=repeats, help="interleaved timing rounds (medians are kept)")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--jsonl", default=None, help="also append each record to this file as it completes")


def append_jsonl(path: str | None, records: list[dict]) -> None:
    """Append ``records`` to the JSONL file ``path`` (none: nothing)."""
    if path:
        with open(path, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
