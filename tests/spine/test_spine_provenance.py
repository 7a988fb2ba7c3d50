"""code_version: the commit, + "+dirty" only when tracked source (package, manifests, analysis) differs.

A real git repository in a temporary folder holds a copy of ``repro/store/provenance.py`` at its own
path, beside a manifest, an analysis file, a stored result, a report and a doc; the copy is imported from
there, so ``git`` sees that repository. A copy of the whole package inside an unrelated repository is
imported by a fresh process from there."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import repro.store.provenance as provenance

FILES = {
    "repro/__init__.py": "",
    "experiments/m.yaml": "name: m\n",
    "analysis/a.py": "X = 1\n",
    "results/runs/m/0/summary.json": "{}\n",
    "results/REPORT.md": "# report\n",
    "docs/x.md": "doc\n",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "repro/store").mkdir()
    shutil.copy(provenance.__file__, tmp_path / "repro/store/provenance.py")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    spec = importlib.util.spec_from_file_location("provenance_copy", tmp_path / "repro/store/provenance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tmp_path, module.code_version, git(tmp_path, "rev-parse", "--short", "HEAD")


def test_results_reports_and_docs_leave_the_code_clean(repo):
    root, code_version, rev = repo
    assert code_version() == rev
    for name in ("results/runs/m/0/summary.json", "results/REPORT.md", "docs/x.md"):
        (root / name).write_text("changed\n")
    (root / "results/runs/m/1").mkdir()
    (root / "results/runs/m/1/summary.json").write_text("{}\n")  # a new stored run
    assert code_version() == rev


@pytest.mark.parametrize("name", ["repro/__init__.py", "experiments/m.yaml", "analysis/a.py"])
def test_a_changed_source_file_is_dirty_until_committed(repo, name):
    root, code_version, rev = repo
    (root / name).write_text("changed = 1\n")
    assert code_version() == rev + "+dirty"
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "change")
    assert code_version() == git(root, "rev-parse", "--short", "HEAD") != rev


def test_outside_a_repository_it_says_unknown(tmp_path):
    shutil.copy(provenance.__file__, tmp_path / "provenance.py")
    spec = importlib.util.spec_from_file_location("provenance_loose", tmp_path / "provenance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.code_version() == "unknown"


@pytest.mark.faults
def test_a_copy_of_the_code_inside_another_repository_records_no_commit_of_it(tmp_path):
    """Issue 62: a copy of the code without its .git lying inside an unrelated repository recorded that
    repository's commit (a README-only one) as the code_version of every run it trained."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "README").write_text("another project\n")
    git(outer, "init", "-q")
    git(outer, "add", "README")
    git(outer, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "README only")
    readme_only = git(outer, "rev-parse", "--short", "HEAD")
    copy = outer / "copy"
    shutil.copytree(Path(provenance.__file__).parents[1], copy / "repro", ignore=shutil.ignore_patterns("__pycache__"))
    asked = subprocess.run(
        [sys.executable, "-c", "from repro.store import provenance as p; print(p.__file__); print(p.code_version())"],
        cwd=copy,
        env={**os.environ, "PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
    )
    assert asked.returncode == 0, asked.stderr
    where, version = asked.stdout.splitlines()
    assert Path(where) == copy / "repro" / "store" / "provenance.py"  # the copy's code, not this checkout's
    assert version == provenance.UNKNOWN != readme_only
