"""``repro run --launcher local``: the selection as parallel local processes through submitit's local
executor, with the same results as a direct run; the store records each run's job for ``repro status``."""

from __future__ import annotations

import json

import pytest

from repro.cli import main
from repro.config import manifest as manifests
from repro.config.access import Access
from repro.session.jobs import run_job
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


def test_each_job_trains_the_run_its_parent_resolved_under_every_command_line_transform(
    tmp_path, write_manifest, one_thread_jobs, capsys
):
    """A sweep (-m), a set key, --seeds and --max-steps all change the runs (and the ids) the parent
    resolves; each job must resolve the same run from its description, in another process (the bug: a
    job left --max-steps out, got another id and failed every run)."""
    path = write_manifest(steps=20)
    root = tmp_path / "results"
    argv = ["-m", "train.lr=0.003,0.002", "train.log_every=3", "--seeds", "2", "--max-steps", "6"]
    assert main(["--results", str(root), "run", str(path), *argv, "--launcher", "local", "--max-parallel", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("as local job") == 4 and out.count(" done") == 4 and "failed" not in out, out
    rows = {r["run_id"]: r for r in _status(root, capsys)}
    assert len(rows) == 4 and {r["status"] for r in rows.values()} == {"finished"}
    assert {r["steps"] for r in rows.values()} == {6} and {r["job_state"] for r in rows.values()} == {"finished"}
    # the very ids a direct run of the same command line resolves, and the same bits
    direct_root = tmp_path / "direct"
    assert main(["--results", str(direct_root), "run", str(path), *argv]) == 0
    capsys.readouterr()
    direct = {r["run_id"]: r for r in _status(direct_root, capsys)}
    assert direct.keys() == rows.keys()
    assert {k: (r["valid_bits"], r["seed"]) for k, r in direct.items()} == {
        k: (r["valid_bits"], r["seed"]) for k, r in rows.items()
    }


def test_a_failed_jobs_reason_reaches_the_parent_in_one_line_without_a_traceback(
    tmp_path, write_manifest, one_thread_jobs, capsys
):
    path = write_manifest(steps=12)
    root = tmp_path / "results"
    jobs = [(manifests.load(path).name, _job_of(path, root, "0123456789ab"))]
    assert launch.run_local(root, jobs, 1, print, run_job) == 1
    (line,) = [line for line in capsys.readouterr().out.splitlines() if ": job " in line]
    assert "failed, exit status 2: job of run 0123456789ab: no run of" in line and "Traceback" not in line, line
    log = next((root / "jobs" / "local").glob("*/*_log.err")).read_text()
    assert "error: job of run 0123456789ab" in log and "Traceback" not in log, log


def _job_of(path, root, run_id):
    return launch.LaunchedRun(ref=str(path), overrides=(), scale="tiny", seeds=None, run_id=run_id, results=root)


def _status(root, capsys):
    assert main(["--results", str(root), "status", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


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
    from repro.cli.run import request
    from repro.session import run

    path = two_run_manifest(write_manifest)
    args = build_parser().parse_args(["run", str(path), "--launcher", "slurm", "--nodes", "2", "--devices", "4"])
    args.access = access(args)
    asked = request(args)
    options = run.check(asked, None).parameters()
    assert (options["nodes"], options["ntasks_per_node"]) == (2, 4)
    job = run.job(asked, tmp_path / "results")
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


def test_a_slurm_task_raises_its_runs_failure_so_the_scheduler_records_failed(tmp_path):
    description = _job_of(tmp_path / "m.yaml", tmp_path, "0123")
    assert launch.slurm_job(lambda d: launch.Ended(3), description).code == 3  # trained by another job: success
    with pytest.raises(launch.JobFailed, match=r"run 0123 of .*m.yaml: exit status 2: data\.path: no such file"):
        launch.slurm_job(lambda d: launch.Ended(2, "data.path: no such file"), description)


def test_a_job_process_that_died_is_told_in_one_line():
    trace = (
        "Job (task=0) failed during processing with trace:\n----------------------\nTraceback (most recent call "
        'last):\n  File "x.py", line 1, in <module>\nsubmitit.core.utils.UncompletedJobError: Job 12 (task: 0) '
        "with path /r/12_0_result.pkl has not produced any output (state: FINISHED)\n----------------------\n"
        "You can check full logs with 'job.stderr(0)' and 'job.stdout(0)'or at paths:\n  - /r/12_0_log.err\n"
    )
    assert launch.crash_reason(trace).startswith("submitit.core.utils.UncompletedJobError: Job 12 (task: 0)")


def test_a_local_sweep_prints_its_eta_first_and_its_progress_as_jobs_end(
    tmp_path, write_manifest, one_thread_jobs, monkeypatch, capsys
):
    """Issue 49.4: `--launcher local` printed only started/done, no overall ETA. Real job processes: the
    sweep's ETA (from a run of the same shape stored under the default root) before the first job, and
    after each job that ends how many ended, the time so far and the ETA of what is left."""
    path = two_run_manifest(write_manifest)
    root, timing = tmp_path / "results", tmp_path / "timing"
    (spec, _) = manifests.load(path).expand("tiny")
    stored = RunDir(timing, spec.manifest, spec.run_id)
    stored.write_spec(spec.record(None))
    stored.write_summary(
        {"status": "finished", "seconds_per_step": 0.5, "eval_seconds": 4.0, "valid_targets": 100, "test_targets": 100}
    )
    monkeypatch.setenv("REPRO_RESULTS", str(timing))  # the default root: the shipped runs' timings
    assert main(["--results", str(root), "run", str(path), "--launcher", "local", "--max-parallel", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # 2 runs x (12 steps x 0.5 s + 200 targets x 4.0 s / 200 targets)
    assert lines[0] == f"ETA 20s for 2 run(s), from stored runs of the same shape under {timing}/", lines
    ended = [line for line in lines if line.startswith("[")]
    assert len(ended) == 2 and ended[0].startswith("[1 of 2 ended] elapsed "), lines
    assert ", ETA " in ended[0] and "for 1 run(s)" in ended[0]  # now timed by the run this sweep stored
    assert ended[1].startswith("[2 of 2 ended] elapsed ") and ended[1].endswith(", nothing left")
