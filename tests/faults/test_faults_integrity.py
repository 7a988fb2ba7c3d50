"""Numbers that come from the run they name, and a store that says what is there: a run folder copied
under another id, a spec edited after training, a run folder without its spec, a results root that is
not a folder. Real files, real commands."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from faultkit import reported_copy, repro_process

from repro.cli import main
from repro.config import manifest as manifests
from repro.config.access import Access
from repro.store.runs import RunDir


@pytest.fixture
def trained(tmp_path, write_manifest, capsys):
    """A finished run of the fault manifest (20 steps) in tmp_path/results."""
    path = write_manifest()
    assert main(["run", str(path)]) == 0
    capsys.readouterr()
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    return path, RunDir(tmp_path / "results", m.name, spec.run_id)


def lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def test_a_run_copied_under_another_id_is_corrupt_and_never_adopted(tmp_path, write_manifest, trained, capsys):
    _, a = trained
    other = write_manifest(
        write_manifest().read_text().replace("name: f-run", "name: f-other").replace("steps: 20", "steps: 30"),
        file="other.yaml",
    )
    (spec,) = manifests.load(other).expand("tiny")
    copied = RunDir(tmp_path / "results", "f-run", spec.run_id)  # A's files under the id of another spec
    shutil.copytree(a.path, copied.path)
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    (line,) = lines_with(out, str(copied.path))
    assert line.startswith(f"corrupt: {copied.path / 'spec.yaml'}: the spec hashes to {a.run_id}")
    assert main(["run", str(other)]) == 0
    out = capsys.readouterr().out
    assert "reused" not in out  # trained, not adopted from the copy
    mine = RunDir(tmp_path / "results", "f-other", spec.run_id)
    assert mine.summary()["steps"] == 30 and "reused_from" not in mine.summary()
    assert main(["report", "f-run"]) == 0
    report = (tmp_path / "results" / "reports" / "f-run.md").read_text()
    assert len(lines_with(report, f"corrupt run, left out (`repro run` redoes it): {copied.path}")) == 1


def test_a_finished_twin_whose_bits_are_text_is_named_and_trained_again(tmp_path, write_manifest, trained, capsys):
    """Reuse once adopted a twin whose valid_bits read "NaN" and broke on its scores (a ValueError traceback)."""
    _, a = trained
    a.update_summary(valid_bits="NaN")
    other = write_manifest(write_manifest().read_text().replace("name: f-run", "name: f-other"), file="other.yaml")
    assert main(["run", str(other)]) == 0
    out = capsys.readouterr().out
    assert lines_with(out, "not reused") == [
        f"  not reused: {a.path / 'summary.json'}: valid_bits is 'NaN', not a number"
    ]
    mine = RunDir(tmp_path / "results", "f-other", a.run_id)
    assert "reused_from" not in mine.summary() and mine.summary()["steps"] == 20
    assert isinstance(mine.summary()["valid_bits"], float) and not mine.metrics().empty


@pytest.mark.parametrize(
    ("twin", "name"), [("same computation", "metrics.csv"), ("same spec", "analysis.npz")], ids=["scan", "same-id"]
)
def test_a_finished_twin_with_a_fifo_as_a_data_file_is_named_and_trained_again(tmp_path, straight, twin, name):
    """Issue 62: a twin of the same computation whose metrics.csv is a FIFO was left out by the store's scan,
    so passed over without a word; one of the same spec whose analysis.npz is a FIFO was adopted, and the
    copy of the FIFO hung `repro run`."""
    summary, _ = straight()
    reported_copy(straight, tmp_path)
    source = RunDir(tmp_path / "results", "f-run", summary["run_id"])
    (source.path / name).unlink(missing_ok=True)
    os.mkfifo(source.path / name)
    text = (straight.base / "dense.yaml").read_text().replace("name: f-run", "name: f-other")
    if twin == "same computation":  # another run id, provided by the stored run's numbers
        text = text.replace("min_context: 16}", "min_context: 16, splits: [test]}")
    other = tmp_path / "other.yaml"
    other.write_text(text)
    (spec,) = manifests.load(other, Access(read=(straight.base,))).expand("tiny")
    assert (spec.run_id == source.run_id) == (twin == "same spec")
    done = repro_process(["run", "--allow-read", str(straight.base), str(other)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done
    assert lines_with(done.stdout, "not reused") == [
        f"  not reused: {source.path / name} is a FIFO, not a regular file"
    ]
    mine = RunDir(tmp_path / "results", "f-other", spec.run_id)
    assert "reused_from" not in mine.summary() and mine.summary()["steps"] == 20 and not mine.metrics().empty
    assert os.path.exists(source.path / name) and not (source.path / name).is_file()  # the FIFO left as it was


def test_a_spec_edited_after_training_is_corrupt_everywhere(tmp_path, trained, capsys):
    path, a = trained
    spec = a.path / "spec.yaml"
    spec.write_text(spec.read_text().replace("layers: 1", "layers: 12"))
    assert main(["status"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()  # no row: the only run is corrupt
    assert line.startswith(f"corrupt: {spec}: the spec hashes to ") and f"not its folder's {a.run_id}" in line
    assert main(["run", str(path), "--dry-run"]) == 0
    assert f"{a.run_id}  f-run  -  [corrupt spec: redone by run]" in capsys.readouterr().out
    assert main(["report", str(path)]) == 0
    assert "No stored runs yet" in (tmp_path / "results" / "reports" / "f-run.md").read_text()
    assert main(["sample", a.run_id, "--n", "1", "--length", "4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {spec}: the spec hashes to ")


def test_a_summary_that_names_another_run_is_corrupt(tmp_path, trained, capsys):
    _, a = trained
    a.update_summary(run_id="0123456789ab")
    assert main(["status", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "[]"
    assert f"corrupt: {a.path / 'summary.json'}: names run '0123456789ab', not its folder's {a.run_id}" in captured.err


def test_a_run_folder_without_its_spec_is_listed_as_corrupt(tmp_path, trained, capsys):
    path, a = trained
    (a.path / "spec.yaml").unlink()
    assert main(["status"]) == 0
    assert capsys.readouterr().out.strip() == f"corrupt: {a.path / 'spec.yaml'}: missing"
    assert main(["run", str(path), "--dry-run"]) == 0
    assert f"{a.run_id}  f-run  -  [corrupt spec: redone by run]" in capsys.readouterr().out
    (a.path.parent / "0123456789ab").mkdir()  # a folder with nothing of a run (a lock just taken) is no run
    (a.path.parent / "0123456789ab" / ".lock").touch()
    assert main(["status"]) == 0
    assert "0123456789ab" not in capsys.readouterr().out


@pytest.mark.parametrize("root", ["file", "/dev/null", "/dev/full", "file/below"])
@pytest.mark.parametrize(
    "argv", [["status"], ["status", "--json"], ["run", "M", "--dry-run"], ["report", "M"], ["list"], ["show", "M"]]
)
def test_a_results_root_that_is_not_a_folder_is_refused_by_every_command(tmp_path, write_manifest, capsys, root, argv):
    path = write_manifest()
    (tmp_path / "file").write_text("not a store\n")
    given = root if root.startswith("/") else str(tmp_path / root)
    code = main([a if a != "M" else str(path) for a in argv] + ["--results", given])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and not captured.out, captured
    assert lines[0].startswith(f"error: --results {given}: ") and "not a folder" in lines[0]
    assert (tmp_path / "file").read_text() == "not a store\n"


def test_the_index_never_says_more_than_the_folders(tmp_path, trained, capsys):
    """status keeps results/index/<manifest>.json; an in-place edit of the same size with the old
    modification time restored is still seen (the change time moved), and a garbled index is rebuilt."""
    _, a = trained
    assert main(["status"]) == 0
    index = tmp_path / "results" / "index" / "f-run.json"
    assert a.run_id in json.loads(index.read_text())["runs"] and a.run_id in capsys.readouterr().out
    spec = a.path / "spec.yaml"
    before = spec.stat()
    spec.write_text(spec.read_text().replace("layers: 1", "layers: 3"))
    os.utime(spec, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert spec.stat().st_size == before.st_size and spec.stat().st_mtime_ns == before.st_mtime_ns
    assert main(["status"]) == 0
    assert capsys.readouterr().out.startswith(f"corrupt: {spec}: the spec hashes to ")
    spec.write_text(spec.read_text().replace("layers: 3", "layers: 1"))
    index.write_text("{garbled")
    assert main(["status"]) == 0
    assert a.run_id in capsys.readouterr().out and json.loads(index.read_text())["runs"][a.run_id]["row"]
