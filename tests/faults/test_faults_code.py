"""Code that runs is code the user chose: a manifest's renderer files (``analysis:``) lie in its own folder
tree, the project's analysis/, $REPRO_ANALYSIS or a folder named with --trust-code; reading a manifest
(validate, show, list, run --dry-run) never runs them; one that exits while it loads fails in one line.
Real processes where the file ends the process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from repro.cli import main

RENDERER = """
import pathlib
pathlib.Path({marker!r}).write_text("ran")
{exit}
from repro.report.renderers import renderer


@renderer({name!r}, reference={{"sides": list}})
def mine(ctx):
    return []
"""


def with_renderer(tmp_path, write_manifest, where: str, exit: str = "", trains: bool = True) -> tuple:
    """The fault manifest (``trains``, else one that trains nothing and renders from its reference) at
    tmp_path/m.yaml rendering a renderer of its own from a file at ``where`` (relative to tmp_path, or
    absolute); returns (manifest, the marker the file writes when it runs)."""
    marker = tmp_path / "ran.txt"
    target = (tmp_path / where).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    name = f"mine-{tmp_path.name}"  # one per test: in-process, a renderer name is registered once
    target.write_text(RENDERER.format(marker=str(marker), exit=exit, name=name))
    own = f"renders: [{name}]\nanalysis: {where}\nreference: {{sides: [1, 2]}}\n"
    path = write_manifest(top=own) if trains else write_manifest(f"name: f-code\ntitle: t\npaper: none\n{own}")
    return path, marker


@pytest.mark.parametrize(
    "argv", [["validate", "M"], ["show", "M"], ["run", "M", "--dry-run"], ["list"], ["run", "M", "--no-wandb"]]
)
def test_reading_a_manifest_never_runs_its_renderer_files(tmp_path, write_manifest, capsys, argv, monkeypatch):
    path, marker = with_renderer(tmp_path, write_manifest, "figs/mine.py")
    monkeypatch.setenv("REPRO_EXPERIMENTS", str(tmp_path))
    assert main([str(path) if a == "M" else a for a in argv]) == 0
    assert not marker.exists()
    if argv[0] == "validate":
        assert "renderer files: " + str((tmp_path / "figs" / "mine.py").resolve()) in capsys.readouterr().out
    assert main(["validate", "--renderers", str(path)]) == 0 and marker.read_text() == "ran"  # asked: it runs


def test_a_renderer_file_outside_the_manifest_folder_is_refused_unless_allowed(
    tmp_path, tmp_path_factory, write_manifest, capsys
):
    outside = tmp_path_factory.mktemp("elsewhere").resolve() / "mine.py"
    path, marker = with_renderer(tmp_path, write_manifest, str(outside))
    for argv in (["validate", str(path)], ["show", str(path)], ["run", str(path), "--dry-run"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"analysis: {outside}: {outside} lies outside the manifest's folder" in err[0], err
    assert not marker.exists()
    assert main(["--trust-code", str(outside.parent), "validate", str(path)]) == 0  # consent, per folder
    assert not marker.exists()


@pytest.mark.parametrize(
    "exit, shown",
    [
        ("import sys; sys.exit(0)", "SystemExit: 0"),
        ("import os; os._exit(0)", "os._exit(0) called while loading"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("raise SystemExit('done')", "SystemExit: done"),
    ],
)
@pytest.mark.parametrize("command", ["validate --renderers", "report"])
def test_a_renderer_file_that_exits_while_loading_cannot_make_a_command_succeed(
    tmp_path, write_manifest, exit, shown, command
):
    path, marker = with_renderer(tmp_path, write_manifest, "figs/mine.py", exit=exit, trains=False)
    env = {**os.environ, "REPRO_RESULTS": str(tmp_path / "results"), "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-m", "repro", *command.split(), str(path)], capture_output=True, text=True, env=env
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and marker.exists(), proc  # it ran, and the command failed
    assert len(lines) == 1 and "the renderer file does not load: " in lines[0] and shown in lines[0], proc.stderr
