"""A single-node SLURM cluster on this machine for the tests: munged, slurmctld and slurmd (Debian's
slurm-wlm) with a private munge socket, ports, spool and state under a temporary directory.

:func:`start` returns the running :class:`Cluster` or raises :class:`Unavailable` saying why (no
packages, not root, a daemon that does not come up: the reason includes its log's last lines).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")


class Unavailable(RuntimeError):
    """The cluster cannot start here; the message says why."""


@dataclass
class Cluster:
    conf: Path
    env: dict[str, str]  # what client commands (sbatch, squeue, scancel) need: SLURM_CONF
    procs: list[subprocess.Popen] = field(default_factory=list)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _conf(base: Path, host: str, cpus: int, memory_mb: int) -> str:
    return "\n".join(
        [
            "ClusterName=repro-test",
            f"SlurmctldHost={host}(127.0.0.1)",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            f"AuthInfo=socket={base}/munge.socket",
            f"StateSaveLocation={base}/state",
            f"SlurmdSpoolDir={base}/spool",
            f"SlurmctldPidFile={base}/slurmctld.pid",
            f"SlurmdPidFile={base}/slurmd.pid",
            f"SlurmctldLogFile={base}/slurmctld.log",
            f"SlurmdLogFile={base}/slurmd.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SchedulerType=sched/backfill",
            "KillWait=30",
            "InactiveLimit=0",
            "MinJobAge=300",
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _tail(path: Path) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-3:])
    except OSError:
        return "no log"


def start(base: Path, timeout: float = 30) -> Cluster:
    missing = [d for d in (*DAEMONS, "sbatch", "squeue", "scancel", "sinfo") if shutil.which(d) is None]
    if missing:
        raise Unavailable(f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        raise Unavailable("the daemons run as root here, and this is not root")
    if not Path("/etc/munge/munge.key").exists():
        raise Unavailable("no /etc/munge/munge.key (the munge package creates it)")
    host = socket.gethostname().split(".")[0]
    for sub in ("state", "spool"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    conf = base / "slurm.conf"
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 // 2
    conf.write_text(_conf(base, host, os.cpu_count() or 1, memory))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = Cluster(conf, {"SLURM_CONF": str(conf)})
    commands = [
        [
            "munged",
            "-F",
            "--force",
            f"--socket={base}/munge.socket",
            f"--pid-file={base}/munged.pid",
            f"--log-file={base}/munged.log",
            f"--seed-file={base}/munged.seed",
        ],
        ["slurmctld", "-D", "-i", "-f", str(conf)],
        ["slurmd", "-D", "-f", str(conf)],
    ]
    try:
        for cmd in commands:
            cluster.procs.append(
                subprocess.Popen(
                    cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
            if cmd[0] == "munged":
                _wait(lambda: (base / "munge.socket").exists(), timeout, "munged", base / "munged.log", cluster)
        _wait(
            lambda: subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout.strip()
            in ("idle", "mixed", "allocated"),
            timeout,
            "slurmd",
            base / "slurmd.log",
            cluster,
            base / "slurmctld.log",
        )
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait(ready, timeout: float, what: str, log: Path, cluster: Cluster, other: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [p.args[0] for p in cluster.procs if p.poll() is not None]
        if dead:
            raise Unavailable(
                f"{', '.join(dead)} exited at start: {_tail(log)}" + (f" / {_tail(other)}" if other else "")
            )
        if ready():
            return
        time.sleep(0.2)
    raise Unavailable(
        f"{what} not ready within {timeout:.0f} s: {_tail(log)}" + (f" / {_tail(other)}" if other else "")
    )
