"""Signals and the per-run lock, with real processes: SIGTERM/SIGINT checkpoint at the next step
boundary, mark the run interrupted, print one line and exit 143/130; a second trainer skips a run."""

from __future__ import annotations

import os
import signal
import socket

import torch
from faultkit import Gate, SignalAt, SignalParentAt

from repro.cli import main
from repro.config import manifest as manifests
from repro.files import locks
from repro.store.runs import RunDir


def loaded(path):
    m = manifests.load(path)
    return m, m.expand("tiny")[0]


def one_line(err: str) -> str:
    """Our one line: the last on stderr (above it only Lightning's start-up notes), no traceback."""
    lines = err.strip().splitlines()
    assert "Traceback" not in err and sum(line.startswith(("interrupted", "error")) for line in lines) == 1, err
    return lines[-1]


def assert_resumes_exactly(path, m, spec, root, straight, capsys, step):
    """The next `repro run` resumes from ``step`` and ends as the uninterrupted run."""
    capsys.readouterr()
    assert main(["--results", str(root), "run", str(path)]) == 0
    assert f"resuming {spec.run_id} from step {step}" in capsys.readouterr().out
    summary = RunDir(root, m.name, spec.run_id).summary()
    assert summary["status"] == "finished"
    assert abs(summary["test_bits"] - straight()[0]["test_bits"]) < 1e-4


def test_sigterm_inside_a_step_checkpoints_after_it_and_exits_143(tmp_path, write_manifest, kid, straight, capsys):
    path = write_manifest()
    m, spec = loaded(path)
    root = tmp_path / "results"
    code, _, err = kid(["run", str(path)], callbacks=[SignalAt(7, signal.SIGTERM, inside=True)])
    assert code == 143
    line = one_line(err)
    assert line.startswith("interrupted by SIGTERM: ") and spec.run_id in line and "checkpoint of step 7 kept" in line
    run = RunDir(root, m.name, spec.run_id)
    assert run.summary()["status"] == "interrupted"
    assert_resumes_exactly(path, m, spec, root, straight, capsys, 7)


def test_sigint_exits_130_with_one_line(tmp_path, write_manifest, kid, straight, capsys):
    path = write_manifest()
    m, spec = loaded(path)
    code, _, err = kid(["run", str(path)], callbacks=[SignalAt(6, signal.SIGINT, inside=True)])
    assert code == 130
    assert one_line(err).startswith("interrupted by SIGINT: ") and "checkpoint of step 6 kept" in err
    assert RunDir(tmp_path / "results", m.name, spec.run_id).summary()["status"] == "interrupted"
    assert_resumes_exactly(path, m, spec, tmp_path / "results", straight, capsys, 6)


def test_sigterm_during_the_final_evaluation_stops_at_once(tmp_path, write_manifest, kid, straight, capsys):
    path = write_manifest()
    m, spec = loaded(path)
    code, _, err = kid(["run", str(path)], kill_in_eval=signal.SIGTERM)
    assert code == 143 and "checkpoint of step 20 kept" in one_line(err)
    assert RunDir(tmp_path / "results", m.name, spec.run_id).summary()["status"] == "interrupted"
    assert_resumes_exactly(path, m, spec, tmp_path / "results", straight, capsys, 20)


def test_a_second_signal_stops_at_once_keeping_the_last_checkpoint(tmp_path, write_manifest, kid, straight, capsys):
    path = write_manifest()
    m, spec = loaded(path)
    code, _, err = kid(["run", str(path)], callbacks=[SignalAt(8, signal.SIGTERM, inside=True, times=2)])
    assert code == 143 and "checkpoint of step 5 kept" in one_line(err)
    assert_resumes_exactly(path, m, spec, tmp_path / "results", straight, capsys, 5)


def test_a_second_trainer_skips_the_run_another_holds_and_trains_the_others(
    tmp_path, write_manifest, kid, forkserver, capsys
):
    path = write_manifest(train=", seed: 0", grid="grid:\n  train.seed: [0, 1]\n")
    first, second = manifests.load(path).expand("tiny")
    ready, go = forkserver.Event(), forkserver.Event()
    holder = kid(["run", str(path)], start=True, callbacks=[Gate(3, ready, go)])
    try:
        assert ready.wait(120), "the first trainer never reached step 3"
        capsys.readouterr()
        assert main(["run", str(path)]) == 3  # one run skipped: another process trains it
        out = capsys.readouterr().out
        assert f"skipped: run {first.run_id} is being trained by host {socket.gethostname()} pid {holder.pid}" in out
        assert RunDir(tmp_path / "results", first.manifest, second.run_id).summary()["status"] == "finished"
    finally:
        go.set()
        holder.join(120)
    assert holder.exitcode == 0  # it finished its run, then found the other one finished
    run = RunDir(tmp_path / "results", first.manifest, first.run_id)
    assert run.summary()["status"] == "finished" and run.metrics()["step"].is_unique
    assert locks.holder(run.path / ".lock") is None  # released with the process
    assert os.path.exists(run.path / ".lock")


def test_sigterm_to_the_main_process_of_a_ddp_run_stops_every_rank_at_one_boundary(tmp_path, write_manifest, kid):
    path = write_manifest()
    m, spec = loaded(path)
    code, _, err = kid(["run", str(path), "--devices", "2"], callbacks=[SignalParentAt(4, signal.SIGTERM)])
    assert code == 143, err
    run = RunDir(tmp_path / "results", m.name, spec.run_id)
    step = torch.load(run.last_checkpoint, weights_only=True)["global_step"]
    assert 4 <= step < 20 and f"checkpoint of step {step} kept" in one_line(err)
    assert run.summary()["status"] == "interrupted"
    assert not list(run.path.rglob("*.tmp")) and not (run.path / ".temp.ckpt").exists()


def test_sighup_is_sigterm_checkpoint_interrupted_and_129(tmp_path, write_manifest, kid, straight, capsys):
    path = write_manifest()
    m, spec = loaded(path)
    code, _, err = kid(["run", str(path)], callbacks=[SignalAt(7, signal.SIGHUP, inside=True)])
    assert code == 129
    line = one_line(err)
    assert line.startswith("interrupted by SIGHUP: ") and "checkpoint of step 7 kept" in line
    assert RunDir(tmp_path / "results", m.name, spec.run_id).summary()["status"] == "interrupted"
    assert_resumes_exactly(path, m, spec, tmp_path / "results", straight, capsys, 7)


def test_a_signal_repeated_while_the_process_exits_is_ignored(tmp_path, write_manifest, kid, straight, capsys):
    path = write_manifest()
    m, spec = loaded(path)
    callbacks = [SignalAt(7, signal.SIGTERM, inside=True)]
    code, _, err = kid(["run", str(path)], callbacks=callbacks, signal_after=signal.SIGTERM)
    assert code == 143 and "checkpoint of step 7 kept" in one_line(err)  # one line, no traceback
    assert RunDir(tmp_path / "results", m.name, spec.run_id).summary()["status"] == "interrupted"
    assert_resumes_exactly(path, m, spec, tmp_path / "results", straight, capsys, 7)
