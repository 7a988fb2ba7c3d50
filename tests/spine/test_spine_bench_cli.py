"""`repro bench cli` times the read-only commands as a user's shell starts them and stores the records."""

import json
import subprocess
import sys


def test_bench_cli_records_each_command_and_the_load(tmp_path):
    out = tmp_path / "cli.json"
    cmd = [sys.executable, "-m", "repro", "--results", str(tmp_path / "results"), "bench", "cli"]
    done = subprocess.run(
        [*cmd, "--repeats", "1", "--commands", "list,show", "--out", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    records = json.loads(out.read_text())
    assert [r["command"] for r in records] == ["repro list", "repro show as-table1"]
    for rec in records:
        assert rec["rounds"] == 1 and rec["seconds"] == rec["fastest"] > 0
        assert isinstance(rec["idle"], bool) and "load_average_before" in rec


def test_bench_cli_refuses_an_unknown_command(tmp_path):
    cmd = [sys.executable, "-m", "repro", "--results", str(tmp_path), "bench", "cli", "--commands", "lst"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: --commands: unknown lst; known: list, validate, show, status"
    ]
    assert not (tmp_path / "bench").exists()
