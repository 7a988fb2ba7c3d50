"""The process around the command (issue 49): a working directory deleted under it, a locale whose
encoding lacks what the command prints or reads, Ctrl-C while it starts or while it prepares data. Real
processes: one line, exit 2 for what the user can fix and 130 for Ctrl-C, no traceback, nothing
half-written."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from repro.cli import GONE, STARTING, main
from repro.cli.data import INTERRUPTED as PREPARE_INTERRUPTED

# a fresh interpreter that sends itself SIGINT when the command imports its parser (pandas, pydantic and
# the store's modules loaded, the commands' still loading)
INTERRUPT_WHILE_IMPORTING = """
import os, signal, sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "repro.cli.parser":
            os.kill(os.getpid(), signal.SIGINT)

sys.meta_path.insert(0, Interrupt())
from repro.cli import main
sys.exit(main(sys.argv[1:]))
"""


def repro(
    argv: list[str], code: str | None = None, cwd_gone: Path | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    """``python -m repro ARGV`` (or ``python -c CODE ARGV``) in a fresh interpreter, with ``env`` added to
    the environment; ``cwd_gone``: it starts in this folder, deleted once it is there."""

    def enter_and_delete() -> None:
        os.chdir(cwd_gone)
        os.rmdir(cwd_gone)

    return subprocess.run(
        [sys.executable, *(["-c", code] if code else ["-m", "repro"]), *argv],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})},
        preexec_fn=enter_and_delete if cwd_gone else None,
    )


@pytest.mark.parametrize("command", [["run", "M"], ["report", "M"], ["status"], ["list"]])
def test_a_deleted_working_directory_is_one_line_before_torch_loads(tmp_path, write_manifest, command):
    path = write_manifest()
    (tmp_path / "gone").mkdir()
    argv = ["--results", str(tmp_path / "results"), *(str(path) if a == "M" else a for a in command)]
    proc = repro(argv, cwd_gone=tmp_path / "gone")
    assert (proc.returncode, proc.stderr.strip(), proc.stdout) == (2, GONE, "")  # not MKL's fatal error
    assert not (tmp_path / "gone").exists() and not (tmp_path / "results").exists()


def prepared(tmp_path: Path) -> list[Path]:
    """What the data root holds of `file` datasets (hidden leftovers included)."""
    folder = tmp_path / "data" / "file"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path, corpus):
    argv = ["data", "prepare", "file", "--from", str(corpus), "--kind", "text8"]
    proc = repro(argv, code=INTERRUPT_WHILE_IMPORTING)
    assert (proc.returncode, proc.stderr.strip(), proc.stdout) == (130, STARTING, "")
    assert prepared(tmp_path) == []


def test_ctrl_c_while_data_is_prepared_says_what_it_leaves_of_the_data(tmp_path, corpus, kid, capsys):
    argv = ["data", "prepare", "file", "--from", str(corpus), "--kind", "text8"]
    code, out, err = kid(argv, signal_in=("repro.data.api", "write_meta", signal.SIGINT))  # splits written
    assert (code, err.strip()) == (130, f"interrupted by SIGINT: {PREPARE_INTERRUPTED}"), err
    assert "run" not in PREPARE_INTERRUPTED and prepared(tmp_path) == []  # its temporary copy went with it
    assert main(argv) == 0
    (dataset,) = prepared(tmp_path)
    assert sorted(p.name for p in dataset.iterdir()) == ["meta.json", "test.npy", "train.npy", "valid.npy"]


def test_an_ascii_locale_prints_and_reads_every_character(tmp_path, straight):
    """``LC_ALL=C PYTHONUTF8=0``: Python's standard streams and default file encoding are ASCII; titles hold
    em-dashes (shipped ones too), and the results root is a spaced, accented folder name."""
    straight()
    root = tmp_path / "résumé results"
    shutil.copytree(straight.base / "results", root)
    manifest = tmp_path / "m.yaml"
    manifest.write_text((straight.base / "dense.yaml").read_text().replace("fault matrix", "fault — matrix"))
    c_locale = {"LC_ALL": "C", "PYTHONUTF8": "0", "REPRO_RESULTS": str(root), "REPRO_ALLOW_READ": str(straight.base)}
    for argv, shown in (
        (["list"], " — "),  # the shipped titles
        (["show", str(manifest)], "f-run"),
        (["status"], "finished"),
        (["report", str(manifest)], "fault — matrix"),
    ):
        proc = repro(argv, env=c_locale)
        assert proc.returncode == 0 and proc.stderr == "" and shown in proc.stdout, (argv, proc.stderr[-2000:])
    assert "fault — matrix" in (root / "reports" / "f-run.md").read_text(encoding="utf-8")
