"""Lightning DDP under torchrun, in real CPU processes over gloo, on the adaptive-span model (whose
recurrent cache each rank keeps for its own streams): two "nodes" on this machine train exactly as one
node of two processes; kill -9 of every rank mid-run, then a rerun, ends as the uninterrupted run; a
rerun on another number of processes warns and finishes; a DDP run makes one W&B run, not one per rank."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import ddpkit
import pytest
import torch
from ddpkit import same_run, torchrun

from repro.cli import main
from repro.config import manifest as manifests
from repro.store.runs import RunDir


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> ddpkit.Setup:
    return ddpkit.setup(tmp_path_factory.mktemp("ddp"))


@pytest.fixture(scope="module")
def one_node(setup) -> RunDir:
    return ddpkit.reference(setup, setup.base / "one-node")


@pytest.fixture(scope="module")
def killed(setup) -> Path:
    """A results root whose run was killed (kill -9, every rank) at step 12, after step 10's checkpoint."""
    root = setup.base / "killed"
    kill = (str(ddpkit.HERE / "ddp_kill.py"), "12")
    codes, out = torchrun(setup, root, ["run", str(setup.path), "--devices", "2"], entry=kill)
    assert codes != [0], out[-3000:]
    return root


def test_two_nodes_of_one_process_train_as_one_node_of_two(setup, one_node, tmp_path):
    home = tmp_path / "home"  # no W&B credentials on these "nodes": W&B logs offline, once per run
    home.mkdir()
    nodes = setup.with_env(HOME=str(home), WANDB_MODE=None, WANDB_API_KEY=None, WANDB_SILENT="true")
    root = tmp_path / "results"
    argv = ["run", str(setup.path), "--devices", "1", "--num-nodes", "2"]
    codes, out = torchrun(nodes, root, argv, nodes=2, per_node=1)
    assert codes == [0, 0], out[-3000:]
    run = setup.run(root)
    same_run(run, one_node)
    assert out.count("finished: valid") == 1  # rank 0 alone evaluates and reports
    offline = list((root / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and offline[0].name.endswith(run.summary()["wandb_run_id"]), offline
    ranks = torch.load(run.last_checkpoint, weights_only=True)["repro_ranks"]
    assert len(ranks) == 2 and not torch.equal(ranks[0]["state"][0], ranks[1]["state"][0])  # each rank's own cache


def test_kill_9_of_every_rank_then_rerun_equals_the_uninterrupted_run(setup, one_node, killed, tmp_path):
    root = tmp_path / "results"
    shutil.copytree(killed, root)
    run = setup.run(root)
    assert run.summary()["status"] == "running"
    saved = torch.load(run.last_checkpoint, weights_only=True)
    assert saved["global_step"] == 10 and len(saved["repro_ranks"]) == 2
    codes, out = torchrun(setup, root, ["run", str(setup.path), "--devices", "2"])
    assert codes == [0], out[-3000:]
    assert f"resuming {setup.run_id} from step 10" in out and "warning" not in out
    same_run(run, one_node)


def test_a_rerun_on_another_number_of_processes_warns_and_finishes(setup, killed, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REPRO_DATA", setup.env["REPRO_DATA"])
    root = tmp_path / "results"
    shutil.copytree(killed, root)
    assert main(["--results", str(root), "run", str(setup.path), "--devices", "1"]) == 0
    out = capsys.readouterr().out
    warned = [line for line in out.splitlines() if "warning:" in line]
    assert len(warned) == 1, out
    assert "written by 2 process(es), this run has 1: the recurrent caches start empty" in warned[0]
    assert f"resuming {setup.run_id} from step 10" in out
    summary = setup.run(root).summary()
    assert summary["status"] == "finished" and summary["steps"] == 20 and math.isfinite(summary["test_bits"])
    assert setup.run(root).metrics()["step"].is_unique


def ranks(kid, monkeypatch, argv: list[str], n: int = 2) -> list[tuple[int, str, str]]:
    """``repro ARGV`` as the n ranks of one torchrun job (the environment torchrun gives its workers),
    forked from the fork server (no interpreter start-up); each rank's (exit code, stdout, stderr)."""
    port, procs = ddpkit.free_port(), []
    given = {"GROUP_RANK": 0, "WORLD_SIZE": n, "LOCAL_WORLD_SIZE": n, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
    given["TORCHELASTIC_RUN_ID"] = "test"
    for rank in range(n):
        for key, value in {**given, "RANK": rank, "LOCAL_RANK": rank}.items():
            monkeypatch.setenv(key, str(value))
        procs.append(kid(argv, start=True))
    for key in (*given, "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(key)
    out = []
    for proc in procs:
        proc.join(120)
        if proc.exitcode is None:  # a rank left waiting for a word that never came
            proc.kill()
            proc.join()
        out.append((proc.exitcode, Path(proc.out + ".out").read_text(), Path(proc.out + ".err").read_text()))
    return out


def test_an_error_of_rank_0_before_training_stops_every_rank(write_manifest, kid, monkeypatch):
    path = write_manifest()  # --save without an override: an error only rank 0 meets (it alone writes)
    (code0, _, err0), (code1, _, err1) = ranks(kid, monkeypatch, ["run", str(path), "--devices", "2", "--save", "x"])
    assert (code0, code1) == (2, 2), (err0, err1)
    assert "--save: needs one manifest and at least one KEY=VALUE override" in err0 and err1.strip() == err0.strip()


def test_a_run_another_process_trains_is_skipped_by_every_rank(tmp_path, write_manifest, kid, monkeypatch):
    path = write_manifest()
    (spec,) = manifests.load(path).expand("tiny")
    with RunDir(tmp_path / "results", spec.manifest, spec.run_id).lock() as lock:
        assert lock.held
        (code0, out0, err0), (code1, out1, err1) = ranks(kid, monkeypatch, ["run", str(path), "--devices", "2"])
    assert (code0, code1) == (3, 3), (err0, err1)
    assert f"skipped: run {spec.run_id} is being trained by" in out0 and out1 == ""  # rank 0 alone speaks
