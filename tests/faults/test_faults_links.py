"""Hostile stores and manifests (issue 22): a symbolic link planted where the store writes is refused,
never followed; a linked run folder is no stored run to look up by id or to count on a report page; a
manifest reads a `file` corpus only under its own folders or a root the user names, and a copy of a
private file stays private."""

from __future__ import annotations

import os
import shutil
import stat

import faultkit
import pytest
from faultkit import one_error, reported_copy, repro_process

from repro import data
from repro.cli import main
from repro.config import manifest as manifests
from repro.store.runs import RunDir


@pytest.mark.parametrize("name", [".lock", "metrics.csv", "summary.json", "checkpoints/last.ckpt"])
def test_a_link_planted_in_a_run_folder_is_refused_and_its_target_untouched(tmp_path, write_manifest, capsys, name):
    path = write_manifest()
    spec = manifests.load(path).expand("tiny")[0]
    run = RunDir(tmp_path / "results", spec.manifest, spec.run_id)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (run.path / name).parent.mkdir(parents=True)
    (run.path / name).symlink_to(victim)
    line = one_error(capsys, ["run", str(path)], code=1)
    assert (
        line
        == f"error: {run.path / name}: a symbolic link where a file of the store is expected; refused (remove the link)"
    )
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in run.path.iterdir()) == sorted({".lock", name.split("/")[0]})


def test_a_linked_run_folder_is_refused_before_its_lock_is_written(tmp_path, write_manifest, capsys):
    path = write_manifest()
    spec = manifests.load(path).expand("tiny")[0]
    run = RunDir(tmp_path / "results", spec.manifest, spec.run_id)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run.path.parent.mkdir(parents=True)
    run.path.symlink_to(elsewhere)
    assert one_error(capsys, ["run", str(path)], code=1).startswith(f"error: {run.path}: a symbolic link")
    assert not any(elsewhere.iterdir())


def _tree(folder):
    return sorted((p.relative_to(folder), p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_a_linked_run_folder_is_refused_by_sample_and_verify_naming_its_target(tmp_path, straight):
    """Issue 62: `repro sample` and `repro verify` looked a run up through a symbolic link in place of its
    folder (or its manifest's) and read the target as a run stored here; status and report named it."""
    summary, _ = straight()
    reported_copy(straight, tmp_path)
    run = RunDir(tmp_path / "results", "f-run", summary["run_id"])
    target = tmp_path / "elsewhere" / "f-run" / run.run_id
    shutil.copytree(run.path, target)  # a whole run with its checkpoint: followed, it would sample
    shutil.rmtree(run.path)
    run.path.symlink_to(target)
    before = _tree(target.parent)
    linked = f"error: {run.path} is a link to {target}: not read; a stored run is a folder of its own"
    manifest_link = tmp_path / "results" / "runs" / "f-stored-elsewhere"  # sorted after f-run: matched second
    manifest_link.symlink_to(target.parent)
    in_link = (
        f"error: {manifest_link} is a link to {target.parent}: not read; a manifest's runs are stored in a folder "
        "of its own"
    )
    for argv, said in (
        (["sample", run.run_id], linked),
        (["sample", run.run_id[:6], "--n", "1"], linked),
        (["sample", str(run.path)], linked),
        (["verify", run.run_id], linked),
        (["sample", str(manifest_link / run.run_id)], in_link),
    ):
        proc = repro_process(argv)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", said + "\n"), argv
    assert _tree(target.parent) == before  # nothing read into the store, nothing written there
    # a link beside a stored run of the same id prefix is no second match: the stored one is found
    shutil.copytree(target, tmp_path / "results" / "runs" / "f-copy" / run.run_id)
    proc = repro_process(["sample", run.run_id, "--n", "1", "--length", "4"])
    assert proc.returncode == 0 and str(tmp_path / "results" / "runs" / "f-copy" / run.run_id) in proc.stdout, proc


def test_a_report_counts_no_linked_run_as_another_manifests(tmp_path, straight):
    """Issue 62: the page of a manifest with no stored runs counted the runs of its relatives (the same
    manifest with other overrides) through a symbolic link in place of a manifest's or a run's folder."""
    summary, _ = straight()
    manifest = reported_copy(straight, tmp_path)
    runs = tmp_path / "results" / "runs"
    elsewhere = tmp_path / "elsewhere"
    shutil.move(runs / "f-run", elsewhere / "f-run")
    (runs / "f-run.train.steps_5").symlink_to(elsewhere / "f-run")  # a manifest's folder
    (runs / "f-run.train.steps_6").mkdir()
    (runs / "f-run.train.steps_6" / summary["run_id"]).symlink_to(elsewhere / "f-run" / summary["run_id"])
    before = _tree(elsewhere)
    report = repro_process(["report", "--allow-read", str(straight.base), str(manifest)])
    assert report.returncode == 0 and report.stderr == "", report
    assert "No stored runs yet: `repro run" in report.stdout
    assert "other overrides" not in report.stdout and "steps_" not in report.stdout, report.stdout
    assert _tree(elsewhere) == before
    # a real folder of a relative is counted as before
    shutil.copytree(elsewhere / "f-run", runs / "f-run.train.steps_7")
    report = repro_process(["report", "--allow-read", str(straight.base), str(manifest)])
    assert "- `f-run.train.steps_7`: 1 finished run(s); `repro report f-run.train.steps_7`" in report.stdout
    assert "steps_5" not in report.stdout and "steps_6" not in report.stdout, report.stdout


def test_a_link_at_a_figure_or_a_dataset_lock_is_refused(tmp_path, straight, corpus, capsys):
    straight()
    manifest = reported_copy(straight, tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    figure = tmp_path / "results" / "reports" / "figures" / "f-run-curves-tiny.png"
    figure.parent.mkdir(parents=True)
    figure.symlink_to(victim)
    line = one_error(capsys, ["report", "--allow-read", str(straight.base), str(manifest)], code=1)
    assert line.startswith(f"error: {figure}: a symbolic link")
    assert victim.read_text() == "precious\n"

    target = data.dataset_dir("file", path=str(corpus), kind="text8")
    lock = target.parent / f".{target.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.symlink_to(victim)
    line = one_error(capsys, ["data", "prepare", "file", "--from", str(corpus), "--kind", "text8"], code=1)
    assert line.startswith(f"error: {lock}: a symbolic link") and victim.read_text() == "precious\n"


def test_a_file_corpus_must_lie_under_the_manifests_folders_or_an_allowed_root(tmp_path, corpus, capsys):
    secret = tmp_path / "private" / "secret.txt"
    secret.parent.mkdir()
    shutil.copy(corpus, secret)
    os.chmod(secret, 0o640)
    folder = tmp_path / "exp"
    folder.mkdir()
    mkfifo = tmp_path / "exp" / "fifo"
    os.mkfifo(mkfifo)
    text = faultkit.manifest(corpus)
    for where, value in (
        ("outside", "../../../../../../../../.." + str(secret)),
        ("a link out", "link.txt"),
        ("a device", "/dev/zero"),
    ):
        (folder / "link.txt").unlink(missing_ok=True)
        (folder / "link.txt").symlink_to(secret)
        (folder / "m.yaml").write_text(text.replace(str(corpus), value))
        line = one_error(capsys, ["validate", str(folder / "m.yaml")])
        assert "lies outside the folders this manifest may read" in line and "--allow-read DIR" in line, (where, line)
    (folder / "m.yaml").write_text(text.replace(str(corpus), "fifo"))
    assert "fifo: not a regular file" in one_error(capsys, ["validate", str(folder / "m.yaml")])
    (folder / "m.yaml").write_text(text.replace(str(corpus), str(secret)))
    assert main(["--allow-read", str(secret.parent), "validate", str(folder / "m.yaml")]) == 0
    assert main(["validate", "--allow-read", str(secret.parent), str(folder / "m.yaml")]) == 0

    # the copy of a file others cannot read is no more readable than its source
    assert main(["data", "prepare", "file", "--from", str(secret), "--kind", "text8"]) == 0
    directory = data.dataset_dir("file", path=str(secret), kind="text8")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()}
    assert len(modes) == 4 and all(mode & 0o077 == 0 for mode in modes.values()), modes
