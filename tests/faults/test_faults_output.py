"""No traceback on the way out: standard output full (``> /dev/full``) or closed (``>&-``), and a step that
runs out of memory (the run marked failed with the reason, resumable). Real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from faultkit import AllocateAt

from repro.config import manifest as manifests
from repro.store.runs import RunDir


def repro_process(argv: list[str], env: dict, stdout) -> subprocess.CompletedProcess:
    """``python -m repro ARGV`` in a fresh interpreter, its standard output ``stdout`` (None: closed)."""
    closed = stdout is None
    return subprocess.run(
        [sys.executable, "-m", "repro", *argv],
        stdout=subprocess.DEVNULL if closed else stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=(lambda: os.close(1)) if closed else None,
    )


@pytest.mark.parametrize("argv", [["status"], ["status", "--json"], ["show", "M"], ["list"]])
@pytest.mark.parametrize("where", ["/dev/full", "closed"])
def test_a_full_or_closed_stdout_is_one_line_exit_1(tmp_path, write_manifest, argv, where):
    path = write_manifest()
    env = {**os.environ, "REPRO_RESULTS": str(tmp_path / "results"), "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [str(path) if a == "M" else a for a in argv]
    if where == "closed":
        proc = repro_process(argv, env, None)
        expected = "error: standard output is closed (>&-)"
    else:
        with open(where, "w") as full:
            proc = repro_process(argv, env, full)
        expected = "error: cannot write to standard output: No space left on device"
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith(expected), proc.stderr


def test_out_of_memory_in_a_step_is_one_line_marks_the_run_failed_and_resumes(
    tmp_path, write_manifest, kid, straight, capsys
):
    from repro.cli import main

    path = write_manifest()
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    code, _, err = kid(["run", str(path)], callbacks=[AllocateAt(8)])
    lines = err.strip().splitlines()
    assert code == 1 and "Traceback" not in err and sum(line.startswith("error") for line in lines) == 1, err
    expected = "out of memory in a training step (train.batch_size = 4 streams of data.block = 32 tokens)"
    assert lines[-1].startswith(f"error: run {spec.run_id} of f-run: {expected}; marked failed"), lines[-1]
    run = RunDir(tmp_path / "results", m.name, spec.run_id)
    assert run.summary()["status"] == "failed" and run.summary()["error"] == expected
    capsys.readouterr()
    assert main(["--results", str(tmp_path / "results"), "run", str(path)]) == 0
    assert f"resuming {spec.run_id} from step 5" in capsys.readouterr().out
    summary = run.summary()
    assert summary["status"] == "finished" and abs(summary["test_bits"] - straight()[0]["test_bits"]) < 1e-4
    assert json.loads((run.path / "summary.json").read_text())["run_id"] == spec.run_id
