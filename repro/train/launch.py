"""Run a selection as jobs through submitit: on SLURM (one job array) or as K local processes.

Each job is handed a :class:`Job`, the description of one run: the same resolution (name or path,
overrides, scale, seeds, ``--max-steps``, the folders the user allowed) narrowed to one run id, into the
same results root (under SLURM a shared file system); the job executes it with the work function the CLI
hands down (``repro.cli.run.run_job``: ``repro run``'s training and exit statuses, no command line
parsed again). A SLURM job has ``--nodes`` x ``--devices`` tasks (one per process; Lightning's SLURM
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
    """A job's run ended with a failing exit status."""


@dataclass(frozen=True)
class Job:
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
    no_wandb: bool = False
    verbose: bool = False


def job(work: Callable[[Job], int], description: Job) -> int:
    """What a job runs: ``work`` (the CLI hands it down: it imports this module) on its description.
    Exit 0 (done) and 3 (another job trains the run) are success."""
    code = work(description)
    if code not in (0, 3):
        raise JobFailed(f"run {description.run_id} of {description.ref} ended with exit status {code}")
    return code


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
    runs: list[tuple[str, Job]],
    options: Slurm,
    parallel: int | None,
    echo: Callable[[str], None],
    work: Callable[[Job], int],
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
        jobs = executor.map_array(job, [work] * len(runs), [description for _, description in runs])
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
    runs: list[tuple[str, Job]],
    parallel: int,
    echo: Callable[[str], None],
    work: Callable[[Job], int],
) -> int:
    """Run ``runs`` as at most ``parallel`` local processes at a time (submitit's local executor); wait
    for all. Exit status as ``repro run``'s: 1 if one failed, else 3 if one was trained elsewhere."""
    import submitit  # the optional `cluster` extra

    executor = submitit.LocalExecutor(folder=root / JOBS / "local" / "%j")
    executor.update_parameters(timeout_min=LOCAL_TIMEOUT_MIN)
    waiting, running, codes = list(runs), [], []
    while waiting or running:
        while waiting and len(running) < parallel:
            manifest, description = waiting.pop(0)
            run_id = description.run_id
            started = executor.submit(job, work, description)
            record(root, manifest, run_id, "local", started.job_id, started.paths.stdout)
            echo(f"started {manifest} {run_id} as local job {started.job_id} (log {started.paths.stdout})")
            running.append((manifest, run_id, started))
        done = [r for r in running if r[2].done()]
        if not done:
            time.sleep(0.5)
        for manifest, run_id, finished in done:
            running.remove((manifest, run_id, finished))
            try:
                codes.append(finished.result())
                echo(
                    f"{manifest} {run_id}: job {finished.job_id} done"
                    + (" (trained elsewhere)" if codes[-1] == 3 else "")
                )
            except Exception as err:  # the job's error, re-raised by submitit
                codes.append(1)
                echo(
                    f"{manifest} {run_id}: job {finished.job_id} failed: {str(err).strip().splitlines()[-1]} "
                    f"(log {finished.paths.stderr})"
                )
    return 1 if 1 in codes else 3 if 3 in codes else 0
