"""``repro retrain``: a stored run trained again from committed code (a real git repository, real processes)
and put in place of the stored one, with its copies under other manifests; the bits before and after in
one line and in the summary (``replaces``); a retraining that fails leaves every stored file as it was;
bad input is one line, exit status 2; a signal stops the training child and the command in one line, a
kill -9 takes the child with it, and the next retrain resumes, leaving no worktree behind."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from replaykit import GIT, alive, commit, env, gated_commit, until, worktrees
from spine_manifests import tiny_manifest
from textcorpus import write_corpus

from repro.config import manifest as manifests
from repro.store.runs import RunDir

HERE = Path(__file__).resolve().parents[2]  # the checkout under test


def _repro(cwd: Path, *args: str, code: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repro", *args], cwd=cwd, env=env(code), capture_output=True, text=True
    )


def _files(run: RunDir) -> dict[str, bytes]:
    return {str(p.relative_to(run.path)): p.read_bytes() for p in sorted(run.path.rglob("*")) if p.is_file()}


@pytest.fixture
def store(tmp_path) -> tuple[Path, str, RunDir, dict]:
    """A git repository holding this checkout's code and a tiny manifest, committed; its run trained by
    that commit into the repository's (untracked) results/, then made to look trained from uncommitted
    code with other bits (as the stored +dirty runs are), and copied under a second manifest (reused)."""
    repo = tmp_path / "repo"
    for folder in ("repro", "analysis"):
        shutil.copytree(HERE / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "experiments").mkdir()
    corpus = write_corpus(repo / "experiments" / "corpus.txt")
    (repo / "experiments" / "t-retrain.yaml").write_text(tiny_manifest(corpus, name="t-retrain"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "repro", "analysis", "experiments"], check=True)
    rev = commit(repo, "tiny")
    trained = _repro(repo, "--results", "results", "run", "t-retrain", "--no-wandb", code=repo)
    assert trained.returncode == 0, trained.stderr[-2000:]
    (spec,) = manifests.load(repo / "experiments" / "t-retrain.yaml").expand("tiny")
    run = RunDir(repo / "results", "t-retrain", spec.run_id)
    honest = run.summary()
    run.write_spec({**run.spec(), "code_version": f"{rev}+dirty"})
    run.write_summary({**honest, "valid_bits": 9.0, "test_bits": 8.0})
    copy = RunDir(repo / "results", "t-other", spec.run_id)
    shutil.copytree(run.path, copy.path, ignore=shutil.ignore_patterns("checkpoints", ".lock"))
    names = {"manifest": "t-other", "scale": "mini", "cell": {"x": 1}}  # its own names, the same spec
    copy.write_spec({**run.spec(), **names})
    copy.write_summary({**run.summary(), **names, "reused_from": "t-retrain"})
    return repo, rev, run, honest


def test_a_run_from_uncommitted_code_is_retrained_at_a_commit_and_put_in_place_with_its_copies(store):
    repo, rev, run, honest = store
    allow = ("--allow-read", str(repo / "experiments"))  # the corpus lies beside the manifest, not the scratch one
    done = _repro(repo, "--results", "results", *allow, "retrain", run.run_id[:8], code=repo)
    assert done.returncode == 0, done.stderr[-2000:]
    valid, test = honest["valid_bits"], honest["test_bits"]
    assert done.stdout.splitlines() == [
        f"{run.run_id}  t-retrain, t-other  retrained at {rev}: valid 9.000000 -> {valid:.6f}, test 8.000000 -> "
        f"{test:.6f} (replaces {rev}+dirty)"
    ]
    replaces = {"valid_bits": 9.0, "test_bits": 8.0, "code_version": f"{rev}+dirty"}
    copy = RunDir(repo / "results", "t-other", run.run_id)
    for stored, names in ((run, ("t-retrain", "tiny", {})), (copy, ("t-other", "mini", {"x": 1}))):
        spec, summary = stored.spec(), stored.summary()  # both read: each spec still hashes to its folder's id
        assert spec["code_version"] == rev and (spec["manifest"], spec["scale"], spec["cell"]) == names
        assert summary["replaces"] == replaces and (summary["manifest"], summary["scale"], summary["cell"]) == names
        assert (summary["valid_bits"], summary["test_bits"]) == (valid, test)  # the same code gives the same bits
    assert copy.summary()["reused_from"] == "t-retrain" and "reused_from" not in run.summary()
    assert run.last_checkpoint is not None and copy.last_checkpoint is not None
    assert not (repo / "results" / ".retrain" / "replace" / run.run_id).exists()  # the scratch run went
    assert [p.name for p in run.path.parent.iterdir()] == [run.run_id]  # nothing staged or old left beside it
    assert (
        subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout.count("\n")
        == 1
    )  # the commit's worktree removed


def test_a_run_named_by_its_folder_relative_to_here_is_retrained(store):
    """The scratch run lives under the folder's store, named absolutely: the commit's code runs elsewhere."""
    repo, rev, run, honest = store
    allow = ("--allow-read", str(repo / "experiments"))
    folder = str(run.path.relative_to(repo))
    done = _repro(repo, "--results", str(repo / "elsewhere"), *allow, "retrain", folder, code=repo)
    assert done.returncode == 0, done.stderr[-2000:]
    assert run.spec()["code_version"] == rev and run.summary()["valid_bits"] == honest["valid_bits"]


def test_a_retraining_that_fails_leaves_the_stored_run_as_it_was(store):
    repo, rev, run, _ = store
    model = repo / "repro" / "models" / "sparse_transformer.py"
    model.write_text(model.read_text() + "\nraise RuntimeError('a broken model')\n")
    broken = commit(repo, "broken")
    before = _files(run)
    allow = ("--allow-read", str(repo / "experiments"))
    failed = _repro(repo, "--results", "results", *allow, "retrain", run.run_id, "--at", broken, code=repo)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    line = failed.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: run {run.run_id}: its retraining exited 1 without a finished run (")
    assert line.endswith(
        f"the stored run is unchanged, the retraining stays under {repo / 'results/.retrain/replace' / run.run_id}"
    )
    assert _files(run) == before


def test_bad_input_is_one_line_and_exit_status_2(store):
    repo, rev, run, _ = store
    cases = {
        ("retrain", "0123abcd"): f"error: run '0123abcd' matches 0 stored run ids under {repo / 'results'}/runs;",
        ("retrain", run.run_id, "--at", "nosuchcommit"): "error: --at nosuchcommit: not a commit of the repository at",
        ("retrain", run.run_id, "--at", ""): "error: --at '': expected a commit (a hash, tag or branch); an empty one",
        ("retrain", run.run_id, "--at", " "): "error: --at ' ': expected a commit",
    }
    for args, said in cases.items():
        proc = _repro(repo, "--results", "results", *args, code=repo)
        assert proc.returncode == 2 and proc.stderr.startswith(said) and len(proc.stderr.splitlines()) == 1, proc.stderr
    (repo / "experiments" / "t-retrain.yaml").write_text("name: t-retrain\n")  # uncommitted code
    proc = _repro(repo, "--results", "results", "retrain", run.run_id, code=repo)
    assert proc.returncode == 2 and proc.stderr == (
        f"error: this checkout's code is uncommitted (code_version {rev}+dirty): commit it, or name a commit with --at\n"
    )
    summary = run.summary()
    summary["status"] = "failed"
    run.write_summary(summary)
    proc = _repro(repo, "--results", "results", "retrain", run.run_id, "--at", rev, code=repo)
    assert proc.returncode == 2 and "not finished" in proc.stderr, proc.stderr
    assert json.loads((run.path / "summary.json").read_text())["status"] == "failed"
    assert yaml.safe_load((run.path / "spec.yaml").read_text())["code_version"] == f"{rev}+dirty"


def test_a_manifest_is_brought_to_one_commit_its_other_runs_retrained_its_missing_runs_trained_the_rest_kept(store):
    repo, rev, run, honest = store
    allow = ("--allow-read", str(repo / "experiments"))
    seed1 = manifests.load(repo / "experiments" / "t-retrain.yaml").expand("tiny", seeds=2)[1]
    args = ("--results", "results", *allow, "retrain", "t-retrain", "--seeds", "2", "--at", rev)
    planned = _repro(repo, *args, "--dry-run", code=repo)
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert planned.stdout.splitlines() == [
        f"{run.run_id}  t-retrain  -  seed 0: retrain at {rev} (trained at {rev}+dirty)",
        f"{seed1.run_id}  t-retrain  -  seed 1: train at {rev} (not stored)",
    ]
    assert not RunDir(repo / "results", "t-retrain", seed1.run_id).path.exists()  # a dry run trains nothing
    done = _repro(repo, *args, code=repo)
    assert done.returncode == 0, done.stderr[-2000:]
    new = RunDir(repo / "results", "t-retrain", seed1.run_id)
    assert new.finished and new.spec()["code_version"] == rev and new.summary()["trained_at"] == rev
    assert new.spec()["train"]["seed"] == seed1.train.seed and new.last_checkpoint is not None
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{run.run_id}  t-retrain, t-other  retrained at {rev}: valid 9.000000 -> ")
    assert lines[1] == (
        f"{seed1.run_id}  t-retrain  t-retrain  trained at {rev}: valid {new.summary()['valid_bits']:.6f}, "
        f"test {new.summary()['test_bits']:.6f} (new)"
    )
    assert run.summary()["valid_bits"] == honest["valid_bits"] and run.spec()["code_version"] == rev
    assert not (repo / "results" / ".retrain" / "replace" / seed1.run_id).exists()
    again = _repro(repo, *args, code=repo)  # every run at the commit: nothing to train
    assert again.returncode == 0 and again.stdout.splitlines() == [
        f"{run.run_id}  t-retrain  -  seed 0: kept (trained at {rev})",
        f"{seed1.run_id}  t-retrain  -  seed 1: kept (trained at {rev})",
    ]


def test_a_commit_whose_code_names_the_run_otherwise_stores_nothing(store):
    repo, rev, run, _ = store
    identity = repo / "repro" / "identity.py"
    identity.write_text(identity.read_text().replace("hexdigest()[:12]", "hexdigest()[-12:]"))
    other = commit(repo, "another id")  # this commit's code hashes specs to other run ids
    identity.write_text(identity.read_text().replace("hexdigest()[-12:]", "hexdigest()[:12]"))
    commit(repo, "the ids back")
    before = _files(run)
    allow = ("--allow-read", str(repo / "experiments"))
    seed1 = manifests.load(repo / "experiments" / "t-retrain.yaml").expand("tiny", seeds=2)[1]
    failed = _repro(
        repo, "--results", "results", *allow, "retrain", "t-retrain", "--seeds", "2", "--at", other, code=repo
    )
    assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr[-2000:]
    line = failed.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: run {run.run_id}: its retraining exited 2 without a finished run (the code of ")
    assert "gives this spec another run id: its spec schema differs" in line
    assert _files(run) == before and not RunDir(repo / "results", "t-retrain", seed1.run_id).path.exists()


def test_status_dirty_lists_the_runs_from_uncommitted_code_and_counts_them_per_manifest(tmp_path, capsys):
    from spine_manifests import stored_run

    from repro.cli import main

    (tmp_path / "corpus.txt").write_text("a corpus the runs never read")
    for name, versions in (("t-a", ["abc1234+dirty", "abc1234"]), ("t-b", ["def5678+dirty"])):
        path = tmp_path / f"{name}.yaml"
        path.write_text(tiny_manifest(tmp_path / "corpus.txt", name=name, grid="grid: {train.lr: [0.001, 0.002]}\n"))
        for spec, version in zip(manifests.load(path).expand("tiny"), versions, strict=False):
            run = stored_run(tmp_path / "results", spec, test_bits=2.0)
            run.write_spec({**run.spec(), "code_version": version})
    assert main(["status", "--dirty", "--results", str(tmp_path / "results")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "code_version" and len(lines) == 4
    assert [line.split()[0] for line in lines[1:3]] == ["t-a", "t-b"]
    assert all(line.split()[-1].endswith("+dirty") for line in lines[1:3])
    assert lines[3] == "2 stored run(s) trained from uncommitted code: t-a 1, t-b 1"
    assert main(["status", str(tmp_path / "t-a.yaml"), "--dirty", "--results", str(tmp_path / "results")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 stored run(s) trained from uncommitted code: t-a 1"


@pytest.mark.faults
def test_a_copy_of_the_code_inside_another_repository_is_refused_naming_its_folder(store, tmp_path):
    """Issue 62: a copy without .git lying in an unrelated repository retrained at that repository's commit."""
    repo, rev, run, _ = store
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "README").write_text("another project\n")
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    subprocess.run([*GIT, "-C", str(outer), "add", "README"], check=True)
    commit(outer, "README only")
    copy = outer / "copy"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    stored = RunDir(copy / "results", "t-retrain", run.run_id)
    before = _files(stored)
    proc = _repro(copy, "--results", "results", "retrain", run.run_id, code=copy)
    assert proc.returncode == 2 and proc.stderr == (
        f"error: this code's folder {copy.resolve()} lies inside the git repository {outer.resolve()}, which is not "
        f"its checkout: expected {copy.resolve()} to be the top of the code's own git checkout, whose commit a "
        "retraining trains at\n"
    )
    assert _files(stored) == before and not (copy / "results" / ".retrain").exists()


def _retraining(repo: Path, run: RunDir, gated: str, ready: Path) -> tuple[subprocess.Popen, int, Path]:
    """``repro retrain`` of ``run`` at the ``gated`` commit, started; once its child trains (waiting at step
    12): the process, the child's pid and the commit's worktree."""
    args = ("--results", "results", "--allow-read", str(repo / "experiments"), "retrain", run.run_id, "--at", gated)
    parent = subprocess.Popen(
        [sys.executable, "-m", "repro", *args], cwd=repo, env=env(repo), stderr=subprocess.PIPE, text=True
    )
    child = int(until(lambda: ready.exists() and ready.read_text(), "training child at step 12"))
    (tree,) = (tree for tree in worktrees(repo) if tree != repo)
    return parent, child, tree


@pytest.mark.faults
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_training_child_and_removes_the_worktree_and_the_same_command_resumes(
    store, tmp_path, signum
):
    """Issue 62: a SIGTERM said nothing and exited 143 while the child trained on, an orphan, and the scratch
    worktree stayed registered for good."""
    repo, rev, run, honest = store
    ready = tmp_path / "ready"
    gated = gated_commit(repo, ready)
    before = _files(run)
    parent, child, tree = _retraining(repo, run, gated, ready)
    parent.send_signal(signum)
    _, err = parent.communicate(timeout=300)
    scratch = repo / "results" / ".retrain" / "replace" / run.run_id
    assert parent.returncode == 128 + signum and "Traceback" not in err, err
    assert err.splitlines()[-1] == (
        f"interrupted by {signum.name}: the retraining of run {run.run_id} is kept under {scratch}; run the same "
        "command again to resume"
    )
    assert not alive(child) and _files(run) == before
    assert worktrees(repo) == [repo] and not tree.exists() and not tree.parent.parent.exists()
    kept = RunDir(scratch, "t-retrain", run.run_id)  # checkpointed at its step boundary, to resume from
    assert kept.summary()["status"] == "interrupted" and kept.last_checkpoint is not None
    allow = ("--allow-read", str(repo / "experiments"))
    again = _repro(repo, "--results", "results", *allow, "retrain", run.run_id, "--at", gated, code=repo)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"retrained at {gated}: valid 9.000000 -> " in again.stdout and worktrees(repo) == [repo]
    assert abs(run.summary()["valid_bits"] - honest["valid_bits"]) < 1e-4 and run.spec()["code_version"] == gated


@pytest.mark.faults
def test_a_kill_9_takes_the_training_child_with_it_and_the_next_retrain_resumes_and_removes_the_stale_worktree(
    store, tmp_path
):
    """Issue 62: after a kill -9 the child trained on, and the rerun failed (`exited 3 without a finished
    run`: the orphan held the scratch run); the killed one's worktree stayed registered."""
    repo, rev, run, honest = store
    ready = tmp_path / "ready"
    gated = gated_commit(repo, ready)
    parent, child, tree = _retraining(repo, run, gated, ready)
    parent.kill()
    parent.communicate(timeout=60)
    until(lambda: not alive(child), "end of the training child after its parent's kill -9", seconds=60)
    assert worktrees(repo) == [repo, tree] and tree.exists()  # the killed one's, stale
    allow = ("--allow-read", str(repo / "experiments"))
    again = _repro(repo, "--results", "results", *allow, "retrain", run.run_id, "--at", gated, code=repo)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"retrained at {gated}: valid 9.000000 -> " in again.stdout
    assert worktrees(repo) == [repo] and not tree.parent.parent.exists()
    assert abs(run.summary()["valid_bits"] - honest["valid_bits"]) < 1e-4 and run.spec()["code_version"] == gated
