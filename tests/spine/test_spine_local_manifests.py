"""A user's own manifests (issue 62 point 3): a documented place, experiments/local/ (ignored by git, found
by name, left out of the tests that hold the shipped manifests to reviewed values); ``include:`` relative to
the including file from any working directory; a manifest run by its path reported by its name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from spine_manifests import shipped

from repro.cli import main
from repro.config import manifest as manifests

ROOT = Path(__file__).resolve().parents[2]
MINE = """\
include: ../adaptive_span/as-ablate-ramp.yaml   # which includes ../shared/adaptive-span.yaml
name: mine
title: "the ramp ablation at R = 16"
set: {model.span.ramp: 16}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the shipped experiments/ with a manifest of the user's own in its local/."""
    folder = tmp_path / "experiments"
    shutil.copytree(manifests.SHIPPED, folder, ignore=shutil.ignore_patterns(manifests.LOCAL))
    (folder / manifests.LOCAL).mkdir()
    (folder / manifests.LOCAL / "mine.yaml").write_text(MINE)
    return folder


def test_a_local_manifest_is_found_by_name_and_left_out_of_the_shipped_ones(project, monkeypatch, capsys):
    assert sorted(shipped(project)) == sorted(shipped())  # what the run-id and paper-spec tests enumerate
    assert "mine" not in shipped(project)
    assert manifests.discover(project)["mine"] == project / "local" / "mine.yaml"
    monkeypatch.setenv("REPRO_EXPERIMENTS", str(project))
    assert main(["show", "mine", "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)
    assert {r["model"]["span"]["ramp"] for r in shown["runs"]} == {16}


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_git_ignores_experiments_local_but_its_readme():
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT).returncode == 0

    assert ignored("experiments/local/mine.yaml") and not ignored("experiments/local/README.md")
    assert (ROOT / "experiments" / "local" / "README.md").is_file()


def test_a_relative_include_reads_the_same_from_another_working_directory(project):
    """From /tmp, the manifest named by a path relative to /tmp: its include (and its include's include)
    read relative to the including file's folder, not to the working directory."""
    ref = os.path.relpath(project / "local" / "mine.yaml", "/tmp")
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "show", ref, "--json"],
        cwd="/tmp",
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    (shown,) = json.loads(proc.stdout)
    ramp = manifests.load(project / "adaptive_span" / "as-ablate-ramp.yaml").expand("tiny")[0]
    got = {(r["train"]["steps"], r["data"]["name"], r["model"]["span"]["ramp"]) for r in shown["runs"]}
    assert got == {(ramp.train.steps, ramp.data.name, 16)}


def test_a_manifest_run_by_its_path_is_reported_by_its_name(write_manifest, tmp_path, capsys):
    path = write_manifest()  # t-tiny, outside experiments/
    assert main(["report", "t-tiny"]) == 2
    err = capsys.readouterr().err
    assert "unknown manifest 't-tiny'" in err and f"run by path into this results root: {tmp_path}" in err
    assert main(["run", str(path), "--no-wandb"]) == 0
    assert main(["report", "t-tiny"]) == 0
    assert (tmp_path / "results" / "reports" / "t-tiny.md").is_file()
