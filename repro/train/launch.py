"""Run a selection as jobs through submitit: on SLURM (one job array) or as K local processes.

Each job is handed a :class:`LaunchedRun`, the description of one run: the same resolution (name or path,
overrides, scale, seeds, ``--max-steps``, the folders the user allowed) narrowed to one run id, into the
same results root (under SLURM a shared file system); the job executes it with the work function the
session hands down (``repro.session.jobs.run_job``: ``repro run``'s training and exit statuses, no
command line parsed again), resolving the run exactly as the parent did (``repro.plan.runs.resolve``, one
function for both), and returns how it ended (:class:`Ended`), so that a failed run's one-line reason reaches the
parent's terminal. A SLURM job has ``--nodes`` x ``--devices`` tasks (one per process; Lightning's SLURM
environment makes them one DDP run), each executing that description with its ``devices`` and ``num_nodes``.
The job itself skips a finished run and one another job trains (the run's lock), and resumes an
interrupted one, so resubmitting, or SLURM requeueing a pre-empted job, continues from the checkpoint.
Each submitted run's job is recorded in ``<results>/jobs/<manifest>/<run_id>.json``; :func:`state`
reads it back for ``repro status``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repro import progress
from repro.config.access import NONE, Access
from repro.errors import UserError
from repro.files import atomic
from repro.identity import check_name
from repro.store.runs import FAILED, FINISHED, INTERRUPTED

LAUNCHERS = ("local", "slurm")
JOBS = "jobs"
LOCAL_TIMEOUT_MIN = 60 * 24 * 365  # submitit's local executor kills a job after 2 minutes by default
SLURM_STATES = {
    "PENDING": "pending",
    "CONFIGURING": "pending",
    "REQUEUED": "pending",
    "RESIZING": "pending",
    "RUNNING": "running",
    "COMPLETING": "running",
    "SUSPENDED": "suspended",
    "COMPLETED": "finished",
    "FAILED": "failed",
    "OUT_OF_MEMORY": "failed",
    "NODE_FAIL": "failed",
    "BOOT_FAIL": "failed",
    "PREEMPTED": "pre-empted",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timed out",
}


class JobFailed(RuntimeError):
    """A SLURM job's run ended with a failing exit status (raised, so that the scheduler says FAILED)."""


@dataclass(frozen=True)
class Ended:
    """How a job's run ended: ``repro run``'s exit status and, when it failed, its one-line reason (the
    ``error:`` line the job printed)."""

    code: int
    reason: str | None = None

    @property
    def failed(self) -> bool:
        return self.code not in (0, 3)  # 3: another job trains the run

    def __str__(self) -> str:
        return f"exit status {self.code}" + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class LaunchedRun:
    """One launched run, as the job executes it: the selection ``repro run`` resolved (``ref``: a
    manifest's name, or its file's absolute path; the override arguments), narrowed to ``run_id``."""

    ref: str
    overrides: tuple[str, ...]  # as the command line writes them: -m first when they sweep
    scale: str
    seeds: int | None  # --seeds (None: the manifest's)
    run_id: str
    results: Path  # the results root, absolute
    access: Access = NONE  # the folders the user allowed the manifest beyond its own
    devices: int = 1  # processes per node
    num_nodes: int = 1
    max_steps: int | None = None
    full_eval: bool = False  # --full-eval: a capped run scores every target
    only: tuple[str, ...] = ()  # --only (the run id narrows further; kept so both resolve alike)
    no_wandb: bool = False
    verbose: bool = False


def slurm_job(work: Callable[[LaunchedRun], Ended], description: LaunchedRun) -> Ended:
    """What a SLURM task runs: ``work`` (the session hands it down: it imports this module) on its description,
    a failed run raised (the scheduler then records FAILED, which ``repro status`` reads back). A local job
    runs ``work`` itself: its failed run is returned, not raised, so the parent prints its reason in one
    line and the job's log holds the run's own ``error:`` line, no traceback."""
    ended = work(description)
    if ended.failed:
        raise JobFailed(f"run {description.run_id} of {description.ref}: {ended}")
    return ended


@dataclass
class Slurm:
    """sbatch options of ``--launcher slurm``."""

    partition: str | None = None
    nodes: int = 1
    tasks_per_node: int = 1  # --devices: one process per device
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    time: int | None = None  # minutes
    mem: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def parameters(self) -> dict:
        given = {
            "partition": self.partition,
            "nodes": self.nodes,
            "ntasks_per_node": self.tasks_per_node,
            "gpus_per_node": self.gpus_per_node,
            "cpus_per_task": self.cpus_per_task,
            "time": self.time,
            "mem": self.mem,
        }
        # time None: no --time (the partition's default), never submitit's 5 minutes
        return {
            **{k: v for k, v in given.items() if v is not None},
            "time": self.time,
            "additional_parameters": dict(self.extra),
        }


def slurm_args(items: list[str]) -> dict[str, str]:
    """``--slurm-arg KEY=VALUE`` items as sbatch options (``KEY`` without the dashes)."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not eq or not key:
            raise UserError(
                f"--slurm-arg {item!r}: expected KEY=VALUE (an sbatch option without its dashes, "
                "e.g. qos=high or constraint=volta32gb)"
            )
        out[key.replace("-", "_")] = value
    return out


def record(root: Path, manifest: str, run_id: str, launcher: str, job_id: str, log: Path) -> None:
    atomic.write_text(
        _record_path(root, manifest, run_id),
        json.dumps(
            {
                "launcher": launcher,
                "job_id": job_id,
                "host": socket.gethostname(),
                "log": str(log),
                "submitted": time.strftime("%Y-%m-%dT%H:%M:%S"),
            },
            indent=2,
        )
        + "\n",
    )


def records(root: Path) -> dict[tuple[str, str], dict]:
    """(manifest, run id) -> the job record of every submitted run (unreadable records are left out)."""
    out = {}
    for path in sorted((root / JOBS).glob("*/*.json")):
        try:
            out[(path.parent.name, path.stem)] = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            continue
    return out


def _record_path(root: Path, manifest: str, run_id: str) -> Path:
    return root / JOBS / check_name(manifest, "manifest") / f"{check_name(run_id, 'run id')}.json"


def state(job: dict, store_status: str | None) -> str:
    """A recorded job's state: the scheduler's while it knows the job, else what the store says of it."""
    if job.get("launcher") == "slurm":
        found = _squeue(job["job_id"]) or _sacct(job["job_id"])
        if found:
            return SLURM_STATES.get(found.split()[0].rstrip("+"), found.lower())
    elif job.get("host") == socket.gethostname() and _alive(int(job["job_id"])):
        return "running"
    return {FINISHED: "finished", FAILED: "failed", INTERRUPTED: "pre-empted"}.get(store_status or "", "ended")


def _squeue(job_id: str) -> str | None:
    return _query(["squeue", "-h", "-j", job_id, "-o", "%T"])


def _sacct(job_id: str) -> str | None:
    return _query(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"])


def _query(cmd: list[str]) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines() if done.returncode == 0 else []
    return lines[0].strip() if lines else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def submit_slurm(
    name: str,
    root: Path,
    runs: list[tuple[str, LaunchedRun]],
    options: Slurm,
    parallel: int | None,
    echo: Callable[[str], None],
    work: Callable[[LaunchedRun], Ended],
) -> int:
    """Submit ``runs`` ((manifest, job) pairs) as one SLURM job array named after ``name`` (what the
    command line selected); print and record the job ids."""
    import submitit  # the optional `cluster` extra

    folder = root / JOBS / "slurm" / "%j"
    executor = submitit.SlurmExecutor(folder=folder)
    executor.update_parameters(
        job_name=f"repro-{name}"[:60].replace("/", "_"),
        **options.parameters(),
        **({"array_parallelism": parallel} if parallel else {}),
    )
    try:
        jobs = executor.map_array(slurm_job, [work] * len(runs), [description for _, description in runs])
    except (submitit.core.utils.FailedJobError, OSError) as err:
        raise UserError(f"sbatch refused the job array: {str(err).strip().splitlines()[-1]}") from None
    for (manifest, description), submitted in zip(runs, jobs):
        run_id = description.run_id
        record(root, manifest, run_id, "slurm", submitted.job_id, submitted.paths.stdout)
        echo(f"submitted {manifest} {run_id} as SLURM job {submitted.job_id} (log {submitted.paths.stdout})")
    echo(f"{len(jobs)} job(s) submitted; `repro status` shows their state")
    return 0


def run_local(
    root: Path,
    runs: list[tuple[str, LaunchedRun]],
    parallel: int,
    echo: Callable[[str], None],
    work: Callable[[LaunchedRun], Ended],
    left: Callable[[list[str], dict[str, float]], str] = lambda run_ids, elapsed: "",
) -> int:
    """Run ``runs`` as at most ``parallel`` local processes at a time (submitit's local executor); wait
    for all, a line each as it ends (a failed one with its reason), then the sweep's progress: ``[3 of 12
    ended] elapsed 4m10s, ETA ...`` (``left``: the ETA of the runs not done, given their ids and
    the seconds the running ones have run). Exit status as ``repro run``'s: 1 if one failed, else 3 if one
    was trained elsewhere."""
    import submitit  # the optional `cluster` extra

    executor = submitit.LocalExecutor(folder=root / JOBS / "local" / "%j")
    executor.update_parameters(timeout_min=LOCAL_TIMEOUT_MIN)
    waiting, running, codes = list(runs), [], []
    began = time.monotonic()
    while waiting or running:
        while waiting and len(running) < parallel:
            manifest, description = waiting.pop(0)
            run_id = description.run_id
            started = executor.submit(work, description)
            record(root, manifest, run_id, "local", started.job_id, started.paths.stdout)
            echo(f"started {manifest} {run_id} as local job {started.job_id} (log {started.paths.stdout})")
            running.append((manifest, run_id, started, time.monotonic()))
        done = [r for r in running if r[2].done()]
        if not done:
            time.sleep(0.5)
        for job in done:
            manifest, run_id, finished, _ = job
            running.remove(job)
            try:
                ended = finished.result()
            except Exception as err:  # the job process itself failed (killed, no result): submitit's error
                ended = Ended(1, crash_reason(str(err)))
            codes.append(1 if ended.failed else ended.code)
            if ended.failed:
                echo(f"{manifest} {run_id}: job {finished.job_id} failed, {ended} (log {finished.paths.stderr})")
            else:
                echo(
                    f"{manifest} {run_id}: job {finished.job_id} done"
                    + (" (trained elsewhere)" if ended.code == 3 else "")
                )
        if done:
            now = time.monotonic()
            ids = [d.run_id for _, d in waiting] + [r[1] for r in running]
            eta = left(ids, {r[1]: now - r[3] for r in running}) if ids else "nothing left"
            echo(
                f"[{len(codes)} of {len(runs)} ended] elapsed "
                f"{progress.duration(now - began)}{', ' + eta if eta else ''}"
            )
    return 1 if 1 in codes else 3 if 3 in codes else 0


def crash_reason(trace: str) -> str:
    """One line for a job process that ended without a result (killed by a signal, out of memory): the
    last line of the traceback or message submitit gives, without the traceback."""
    lines = [line.strip() for line in trace.splitlines()]
    said = [line for line in lines if line and not line.startswith(("-", "File ", "^", "You can check"))]
    ends = [line for line in said if not line.startswith("/") and "Traceback" not in line]
    return (ends[-1] if ends else "the job ended without a result")[:300]
