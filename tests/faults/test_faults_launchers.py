"""``repro run --launcher local``: the selection as parallel local processes through submitit's local
executor, with the same results as a direct run; the store records each run's job for ``repro status``."""

from __future__ import annotations

import json

import pytest

from repro.cli import main
from repro.config import manifest as manifests
from repro.config.access import Access
from repro.store.runs import RunDir
from repro.train import launch, runner

TWO_RUNS = "grid:\n  train.seed: [1, 2]\n"


def two_run_manifest(write_manifest):
    return write_manifest(train=", seed: 1", grid=TWO_RUNS, steps=12)


def direct(path, root):
    """Both runs trained here, one after another: {run_id: summary}."""
    m = manifests.load(path)
    return {s.run_id: runner.run_spec(s, m, root, echo=lambda line: None).summary for s in m.expand("tiny")}


@pytest.fixture
def one_thread_jobs(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the jobs' torch uses one thread, as this process does


def test_local_launcher_with_two_processes_equals_a_direct_run(tmp_path, write_manifest, one_thread_jobs, capsys):
    path = two_run_manifest(write_manifest)
    root = tmp_path / "results"
    assert main(["--results", str(root), "run", str(path), "--launcher", "local", "--max-parallel", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("as local job") == 2 and out.count("done") == 2, out
    expected = direct(path, tmp_path / "direct")
    capsys.readouterr()  # the direct runs' own lines (their evaluation prints progress)
    name = manifests.load(path).name
    for run_id, summary in expected.items():
        got = RunDir(root, name, run_id).summary()
        assert got["status"] == "finished"
        assert (got["valid_bits"], got["test_bits"]) == (summary["valid_bits"], summary["test_bits"])
    assert main(["--results", str(root), "status", "--json"]) == 0
    rows = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert {rows[r]["job_state"] for r in expected} == {"finished"} and all(rows[r]["job"] for r in expected)
    # a second launch submits nothing: both runs are finished
    assert main(["--results", str(root), "run", str(path), "--launcher", "local"]) == 0
    assert "2 of 2 run(s) already finished: not submitted" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--partition", "gpu"], "--partition: SLURM options; allowed only with --launcher slurm"),
        (["--max-parallel", "2"], "--max-parallel 2: allowed: a positive number, with --launcher local|slurm"),
        (["--launcher", "local", "--max-parallel", "0"], "--max-parallel 0: allowed: a positive number"),
        (["--launcher", "slurm", "--slurm-arg", "qos"], "--slurm-arg 'qos': expected KEY=VALUE"),
        (["--num-nodes", "2"], "--num-nodes 2: a multi-node run is started on every node by torchrun or srun"),
        (["--launcher", "local", "--nodes", "2"], "--num-nodes 2: --launcher local runs on this machine; allowed: 1"),
        (["--launcher", "slurm", "--gpus-per-node", "2"], "--gpus-per-node 2: each of a node's --devices 1 processes"),
        (["--devices", "3"], "train.batch_size: 4 cannot be shared by 3 processes (--devices 3 x --num-nodes 1)"),
        (["--launcher", "slurm", "--time", "0"], "--time 0: allowed: a positive number"),
        (["--run-id", "0000"], "--run-id 0000: no run of"),
    ],
)
def test_bad_launcher_options_are_one_line_errors_writing_nothing(tmp_path, write_manifest, argv, says, capsys):
    path = two_run_manifest(write_manifest)
    root = tmp_path / "results"
    assert main(["--results", str(root), "run", str(path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and len(err.strip().splitlines()) == 1, err
    assert not root.exists()


def test_a_slurm_job_has_a_task_per_device_on_each_node_each_running_the_whole_ddp_command(tmp_path, write_manifest):
    from repro.cli.common import access
    from repro.cli.parser import build_parser
    from repro.cli.run import _job

    path = two_run_manifest(write_manifest)
    args = build_parser().parse_args(["run", str(path), "--launcher", "slurm", "--nodes", "2", "--devices", "4"])
    args.access = access(args)
    options = launch.Slurm(nodes=args.num_nodes, tasks_per_node=args.devices).parameters()
    assert (options["nodes"], options["ntasks_per_node"]) == (2, 4)
    job = _job(args, tmp_path / "results", "0123")
    assert (job.devices, job.num_nodes) == (4, 2)


def test_a_job_reads_where_the_command_line_allowed_it(tmp_path, write_manifest, one_thread_jobs, capsys):
    """The corpus lies outside the manifest's folder: ``--allow-read`` lets the command read it, and the
    job (another process) gets the folder in its description, not from the environment."""
    (tmp_path / "sub").mkdir()
    path = write_manifest(file="sub/m.yaml", steps=12)
    root = tmp_path / "results"
    assert main(["--results", str(root), "run", str(path), "--launcher", "local", "--dry-run"]) == 2
    assert "lies outside the folders this manifest may read" in capsys.readouterr().err
    assert main(["--allow-read", str(tmp_path), "--results", str(root), "run", str(path), "--launcher", "local"]) == 0
    assert "done" in capsys.readouterr().out
    (spec,) = manifests.load(path, Access(read=(tmp_path,))).expand("tiny")
    assert RunDir(root, spec.manifest, spec.run_id).summary()["status"] == "finished"
