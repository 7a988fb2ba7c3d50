"""Names resolve in the config stage: each command builds a manifest's runs once per scale, whatever it
asks of them afterwards (its runs, the cells left out, the report's sections)."""

import shutil
from collections import Counter
from pathlib import Path

import pytest

from repro.cli import main
from repro.config.manifest import Manifest


@pytest.fixture
def builds(monkeypatch) -> Counter:
    """(manifest, scale) -> how many times its runs were built."""
    seen: Counter = Counter()
    build = Manifest._build_runs

    def counted(self, scale):
        seen[self.name, scale] += 1
        return build(self, scale)

    monkeypatch.setattr(Manifest, "_build_runs", counted)
    return seen


@pytest.mark.parametrize(
    "argv", [["show", "table1"], ["run", "table1", "--dry-run"], ["status", "as-table1"], ["report", "as-table1"]]
)
def test_a_command_builds_each_manifest_once_per_scale(tmp_path, builds, argv, capsys):
    shipped = Path(__file__).resolve().parents[2] / "results" / "runs" / "as-table1"
    shutil.copytree(shipped, tmp_path / "results" / "runs" / "as-table1")  # a report of stored runs, written here
    assert main(["--results", str(tmp_path / "results"), *argv]) == 0
    assert builds and set(builds.values()) == {1}, builds
