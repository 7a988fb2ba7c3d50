"""``repro verify``: a stored run re-executed at its commit (a real git repository, real processes) gives
its stored bits; a number changed in the store is found at its step with both values; a run that cannot
be re-executed as it was made says why; bad input is one line, exit status 2."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from spine_manifests import stored_run, tiny_manifest
from textcorpus import write_corpus

from repro.config import manifest as manifests
from repro.store.runs import RunDir
from repro.train import verify
from repro.train.compare import first_difference

HERE = Path(__file__).resolve().parents[2]  # the checkout under test
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def _repro(cwd: Path, *args: str, code: Path = HERE) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(code), "WANDB_MODE": "disabled"}
    env.pop("REPRO_RESULTS", None)
    return subprocess.run([sys.executable, "-m", "repro", *args], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, RunDir]:
    """A git repository holding this checkout's code and a tiny manifest, committed; its run trained into
    the repository's (untracked) results/ by that commit's code."""
    repo = tmp_path_factory.mktemp("repo")
    for folder in ("repro", "analysis"):
        shutil.copytree(HERE / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "experiments").mkdir()
    corpus = write_corpus(repo / "experiments" / "corpus.txt")
    (repo / "experiments" / "t-verify.yaml").write_text(tiny_manifest(corpus, name="t-verify"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "repro", "analysis", "experiments"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", "tiny"], check=True)
    trained = _repro(repo, "--results", "results", "run", "t-verify", "--no-wandb", code=repo)
    assert trained.returncode == 0, trained.stderr[-2000:]
    (spec,) = manifests.load(repo / "experiments" / "t-verify.yaml").expand("tiny")
    return repo, RunDir(repo / "results", "t-verify", spec.run_id)


def test_a_stored_run_re_executed_at_its_commit_gives_its_bits_and_a_changed_number_is_found(trained):
    repo, run = trained
    assert "+dirty" not in run.spec()["code_version"]
    files = sorted(p.relative_to(run.path) for p in run.path.rglob("*"))
    # the corpus lies beside the manifest of this checkout, not of the worktree: allowed by name
    allow = ("--allow-read", str(repo / "experiments"))
    same = _repro(repo, "--results", "results", *allow, "verify", run.run_id[:8])
    assert same.returncode == 0, same.stderr[-2000:]
    recorded = run.summary()["environment"]["cpu_isa"]  # the kernels it trained on: verify re-applies them
    assert same.stdout.splitlines() == [
        f"{run.run_id}  t-verify  same bits ({verify._kernels(recorded, run.summary())})"
    ]
    assert sorted(p.relative_to(run.path) for p in run.path.rglob("*")) == files  # nothing written in the store

    lines = run.metrics_path.read_text().splitlines()
    header, row = lines[0].split(","), lines[2].split(",")
    column = header.index("train/bits")
    stored, row[column] = row[column], repr(float(row[column]) + 1e-6)
    lines[2] = ",".join(row)
    run.metrics_path.write_text("\n".join(lines) + "\n")
    differs = _repro(repo, "--results", "results", *allow, "verify", run.run_id)
    assert differs.returncode == 1, differs.stderr[-2000:]
    (line,) = differs.stdout.splitlines()
    assert f"differs at step {row[0]}: train/bits stored {row[column]}, here {stored}" in line


def test_runs_that_cannot_be_re_executed_as_made_say_why(tmp_path, write_manifest):
    (spec,) = manifests.load(write_manifest()).expand("tiny")
    dirty = stored_run(tmp_path / "results", spec, steps=30)
    record = dirty.spec() | {"code_version": "abc1234+dirty"}
    (dirty.path / "spec.yaml").write_text(yaml.safe_dump(record))
    unfinished = stored_run(tmp_path / "results", dataclasses.replace(spec, manifest="other"))
    unfinished.update_summary(status="running")
    proc = _repro(tmp_path, "--results", str(tmp_path / "results"), "verify", str(dirty.path), str(unfinished.path))
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        f"{spec.run_id}  {spec.manifest}  cannot verify: it was trained with uncommitted changes (code_version "
        "abc1234+dirty)",
        f"{spec.run_id}  other  cannot verify: the run is not finished (status running)",
    ]


def test_an_unknown_run_is_one_line_and_exit_status_2(tmp_path):
    proc = _repro(tmp_path, "--results", str(tmp_path / "results"), "verify", "0123abcd")
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert "'0123abcd'" in line and "0 stored runs" in line


def test_the_comparison_leaves_out_the_machine_and_names_a_summary_difference(tmp_path, write_manifest):
    (spec,) = manifests.load(write_manifest()).expand("tiny")
    stored = stored_run(tmp_path / "a", spec, steps=30, valid_bits=2.5, seconds_per_step=0.1, environment={"x": 1})
    again = stored_run(tmp_path / "b", spec, steps=30, valid_bits=2.5, seconds_per_step=0.3, environment={"x": 2})
    assert first_difference(stored, again) is None  # timing and environment are the machine's, not the run's
    again.update_summary(valid_bits=2.5000000000000004)
    assert str(first_difference(stored, again)) == (
        "differs at step 30: summary valid_bits stored 2.5, here 2.5000000000000004"
    )


def test_the_child_gets_the_recorded_instruction_set_and_none_of_this_checkouts_roots(monkeypatch, tmp_path):
    monkeypatch.setenv("REPRO_EXPERIMENTS", "/elsewhere")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx512")
    pinned = verify.child_environment(tmp_path, 2, "avx2")
    assert {k: pinned[k] for k in verify.ISA_VARIABLES} == dict(verify.cpu_isa.AVX2)
    assert pinned["REPRO_CPU_ISA"] == "avx2" and pinned["OMP_NUM_THREADS"] == "2"
    assert "REPRO_EXPERIMENTS" not in pinned and "REPRO_RESULTS" not in pinned
    assert pinned["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)
    native = verify.child_environment(tmp_path, 1, "native")
    assert native["REPRO_CPU_ISA"] == "native" and not set(verify.ISA_VARIABLES) & native.keys()
