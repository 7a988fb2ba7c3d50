"""``repro run --launcher slurm`` on a real single-node SLURM cluster started here (slurmkit): a job array
whose runs end with the same bits as a direct run; a job cancelled mid-run (SIGTERM) resumes when
resubmitted; a DDP job of two tasks (Lightning's SLURM environment), cancelled and resubmitted, ends as
an uninterrupted two-process run. Skipped, with the reason, where the cluster cannot start."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import ddpkit
import pytest
import slurmkit
import torch
from test_faults_launchers import direct, two_run_manifest

from repro.cli import main
from repro.config import manifest as manifests
from repro.store.runs import RunDir

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        running = slurmkit.start(tmp_path_factory.mktemp("slurm"))
    except slurmkit.Unavailable as err:
        pytest.skip(f"no SLURM cluster on this machine: {err}")
    yield running
    running.stop()


@pytest.fixture
def slurm(cluster, monkeypatch):
    """The cluster's client settings in this process's environment (sbatch exports it to the jobs)."""
    for key, value in cluster.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return cluster


def submit(root, path, capsys, *extra) -> list[str]:
    """``repro run --launcher slurm``; the job ids it printed."""
    assert main(["--results", str(root), "run", str(path), "--launcher", "slurm", "--time", "10", *extra]) == 0
    out = capsys.readouterr().out
    return [line.split(" as SLURM job ")[1].split()[0] for line in out.splitlines() if " as SLURM job " in line]


def wait(job_ids: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queued = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True).stdout.split()
        if not set(job_ids) & set(queued):
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs {job_ids} still queued after {timeout} s")


def status(root, capsys) -> dict[str, dict]:
    assert main(["--results", str(root), "status", "--json"]) == 0
    return {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}


def test_a_job_array_ends_as_a_direct_run(tmp_path, write_manifest, slurm, capsys):
    path = two_run_manifest(write_manifest)
    root = tmp_path / "results"
    jobs = submit(root, path, capsys, "--slurm-arg", "comment=repro-test")
    assert len(jobs) == 2 and all("_" in j for j in jobs), jobs  # one array, two tasks
    shown = status(root, capsys)
    assert sorted(r["job"] for r in shown.values()) == sorted(jobs)
    wait(jobs)
    expected = direct(path, tmp_path / "direct")
    name = manifests.load(path).name
    shown = status(root, capsys)
    for run_id, summary in expected.items():
        got = RunDir(root, name, run_id).summary()
        assert got["status"] == "finished", got
        assert (got["valid_bits"], got["test_bits"]) == (summary["valid_bits"], summary["test_bits"])
        assert shown[run_id]["job_state"] == "finished"


def test_a_cancelled_job_resumes_when_resubmitted(tmp_path, write_manifest, slurm, capsys):
    path = write_manifest(steps=400)
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    root = tmp_path / "results"
    (job,) = submit(root, path, capsys)
    run = RunDir(root, m.name, spec.run_id)
    deadline = time.monotonic() + 90
    while not list(run.checkpoints.glob("*.ckpt")) and time.monotonic() < deadline:
        time.sleep(0.1)
    subprocess.run(["scancel", job], check=True)  # SLURM sends the job SIGTERM
    wait([job])
    summary = run.summary()
    assert summary["status"] == "interrupted", summary
    assert status(root, capsys)[spec.run_id]["job_state"] in ("cancelled", "pre-empted")
    (again,) = submit(root, path, capsys)
    wait([again])
    assert run.summary()["status"] == "finished"
    log = json.loads((root / "jobs" / m.name / f"{spec.run_id}.json").read_text())["log"]
    assert f"resuming {spec.run_id} from step" in Path(log).read_text()


def test_a_ddp_job_cancelled_mid_run_resumes_as_an_uninterrupted_run(tmp_path_factory, slurm, capsys, monkeypatch):
    setup = ddpkit.setup(tmp_path_factory.mktemp("slurm-ddp"), steps=200)
    monkeypatch.setenv("REPRO_DATA", setup.env["REPRO_DATA"])
    root = setup.base / "results"
    (job,) = submit(root, setup.path, capsys, "--devices", "2")  # one job, two tasks: ranks 0 and 1
    run = setup.run(root)
    deadline = time.monotonic() + 120
    while not list(run.checkpoints.glob("*.ckpt")) and time.monotonic() < deadline:
        time.sleep(0.1)
    subprocess.run(["scancel", job], check=True)  # SIGTERM to both tasks
    wait([job])
    assert run.summary()["status"] == "interrupted", run.summary()
    saved = torch.load(run.last_checkpoint, weights_only=True)
    assert 5 <= saved["global_step"] < 200 and len(saved["repro_ranks"]) == 2
    (again,) = submit(root, setup.path, capsys, "--devices", "2")
    wait([again])
    ddpkit.same_run(run, ddpkit.reference(setup, setup.base / "reference"), exact_rows=False)
    log = json.loads((root / "jobs" / setup.name / f"{setup.run_id}.json").read_text())["log"]
    assert f"resuming {setup.run_id} from step {saved['global_step']}" in Path(log).read_text()
