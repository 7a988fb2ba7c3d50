"""code_version: the commit, + "+dirty" only when tracked source (package, manifests, analysis) differs.

A real git repository in a temporary folder holds a copy of ``repro/store/provenance.py`` at its own
path, beside a manifest, an analysis file, a stored result, a report and a doc; the copy is imported from
there, so ``git`` sees that repository."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
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


# could_differ, against commits of this repository (its history is part of the checkout)
REPO = Path(provenance.__file__).resolve().parents[2]


def _in_history(*commits: str) -> None:
    for commit in commits:
        found = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
        if shutil.which("git") is None or found.returncode != 0:
            pytest.skip(f"commit {commit} is not in this checkout's history (a shallow clone)")


@pytest.mark.parametrize(
    ("a", "b", "why"),
    [
        ("ff83ffa", "06a843e", "verdicts, the claim language, repro run's and the launcher's code: no numbers"),
        ("9bef4f1", "b22cc7d", "regenerated reports and a report page"),
        ("98467ee", "f715e67", "the power note before a run, a manifest's control cell"),
    ],
)
def test_commits_that_changed_no_code_of_the_numbers_cannot_differ(a, b, why):
    _in_history(a, b)
    bits = provenance.could_differ(a, b, REPO)
    assert (bits.differ, bits.could_differ) == (False, False), why
    assert bits.reason == f"{a} and {b} differ in no code that decides a run's numbers"


def test_commits_that_changed_a_model_or_the_pinned_environment_could_differ():
    _in_history("79a27d5", "f715e67", "06a843e")
    bits = provenance.could_differ("79a27d5^", "79a27d5", REPO)  # the dynamic span's gathers
    assert bits.differ is True and bits.reason == "79a27d5^ and 79a27d5 differ in repro/models/relative_attention.py"
    bits = provenance.could_differ("f715e67", "06a843e", REPO)  # the CPU vendor recorded, kernels pinned
    assert bits.differ is True and bits.reason.startswith("f715e67 and 06a843e differ in repro/cpu_isa.py")


def test_uncommitted_unknown_and_missing_code_versions_count_as_could_differ():
    _in_history("06a843e")
    cases = {
        ("06a843e+dirty", "06a843e+dirty"): (True, "06a843e+dirty is uncommitted code"),
        ("06a843e", "unknown"): (None, "a run records no code version (unknown)"),
        (None, "06a843e"): (None, "a run records no code version (none)"),
        ("06a843e", "0123abc"): (None, "commit 0123abc is not in the repository"),
    }
    for (a, b), (differ, said) in cases.items():
        bits = provenance.could_differ(a, b, REPO)
        assert bits.differ is differ and bits.could_differ and bits.reason.startswith(said), (a, b, bits)
    assert provenance.could_differ("06a843e", "06a843e", REPO) == provenance.Bits(False, "the same commit 06a843e")


def test_without_a_repository_it_is_unknown(tmp_path):
    bits = provenance.could_differ("06a843e", "ff83ffa", tmp_path)
    assert bits.differ is None and bits.reason == f"commit 06a843e is not in the repository at {tmp_path}"
