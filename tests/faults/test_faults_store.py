"""The store under faults: corrupt, crafted or half-written files, a full disk, a read-only results
directory, temp files a kill left, modes that follow the umask, fsync before rename."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from faultkit import SignalAt, reported_copy, repro_process
from storekit import stored_run

from repro import data
from repro.cli import main
from repro.config import lookup
from repro.config import manifest as manifests
from repro.files import atomic
from repro.store.runs import RunDir
from repro.train import finish, runner


def killed_store(tmp_path, write_manifest, kid, **faults):
    """A store whose run a child left behind (kill -9 at step 12 unless other faults are given)."""
    path = write_manifest()
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    code, _, _ = kid(["run", str(path)], **(faults or {"callbacks": [SignalAt(12, signal.SIGKILL)]}))
    assert code == -signal.SIGKILL
    return m, spec, RunDir(tmp_path / "results", m.name, spec.run_id)


def resume(m, spec, root):
    said = []
    summary = runner.run_spec(spec, m, root, echo=said.append).summary
    return summary, "\n".join(said)


CORRUPTIONS = {
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "garbage": lambda b: os.urandom(len(b)),
    "bit-flipped": lambda b: b[: len(b) // 2] + bytes([b[len(b) // 2] ^ 0xFF]) + b[len(b) // 2 + 1 :],
}


def test_a_corrupt_last_checkpoint_falls_back_to_the_previous_one(tmp_path, write_manifest, kid, straight):
    m, spec, run = killed_store(tmp_path, write_manifest, kid)
    for name, corrupt in [*CORRUPTIONS.items(), ("both", None)]:
        root = tmp_path / name
        shutil.copytree(tmp_path / "results", root)
        ckpts = RunDir(root, m.name, spec.run_id).checkpoints
        for file in ["last.ckpt", "previous.ckpt"] if corrupt is None else ["last.ckpt"]:
            (ckpts / file).write_bytes((corrupt or CORRUPTIONS["truncated"])((ckpts / file).read_bytes()))
        summary, said = resume(m, spec, root)
        assert summary["status"] == "finished", name
        assert abs(summary["test_bits"] - straight()[0]["test_bits"]) < 1e-4, name
        assert f"{ckpts / 'last.ckpt'}: " in said and "passed over" in said, (name, said)
        expected = "no usable checkpoint: the run restarts from step 0" if corrupt is None else "from step 5"
        assert expected in said, (name, said)


def test_a_finished_run_with_a_damaged_last_checkpoint_is_sampled_only_once_retrained(tmp_path, straight, capsys):
    """previous.ckpt (step 15) is not what a finished run of 20 steps scored: sample refuses it, naming the
    command that retrains the checkpoint, and that command retrains it (it answered "nothing to retrain")."""
    summary, _ = straight()
    shutil.copytree(straight.base / "results", tmp_path / "results")
    run = RunDir(tmp_path / "results", "f-run", summary["run_id"])
    last, previous = run.checkpoints / "last.ckpt", run.checkpoints / "previous.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # half a last.ckpt
    retrain = f"`repro run f-run --scale tiny --run-id {run.run_id} --retrain-checkpoint` trains it again"
    capsys.readouterr()
    for damaged, why in (
        (
            "last",
            f"{last}: not a checkpoint (empty, truncated or not a zip archive); previous.ckpt holds step 15, "
            "not step 20, whose weights the run scored",
        ),
        ("both", f"{last}: not a checkpoint (empty, truncated or not a zip archive); {previous}: not a checkpoint"),
    ):
        if damaged == "both":
            previous.write_bytes(b"")
        assert main(["sample", str(run.path), "--n", "1", "--length", "4"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.startswith(f"error: {run.path}: {why}"), captured
        assert retrain in captured.err and captured.err.count("\n") == 1  # no "restarts from step 0"
    manifest = ["--allow-read", str(straight.base), "run", str(straight.base / "dense.yaml")]
    assert main([*manifest, "--run-id", run.run_id, "--retrain-checkpoint"]) == 0
    assert "checkpoint retrained and kept" in capsys.readouterr().out
    assert torch.load(last, weights_only=True)["global_step"] == 20 and run.summary() == summary
    assert main(["sample", str(run.path), "--n", "1", "--length", "4"]) == 0


def test_a_kill_while_writing_a_checkpoint_keeps_the_last_and_its_temp_goes(tmp_path, write_manifest, kid, straight):
    m, spec, run = killed_store(tmp_path, write_manifest, kid, kill_in_save=3)
    temps = list(run.checkpoints.glob(".last.ckpt.*.tmp"))
    assert len(temps) == 1 and torch.load(run.last_checkpoint, weights_only=True)["global_step"] == 10
    for name in (".summary.json.x1.tmp", ".analysis.npz.x2.tmp", ".temp.ckpt"):  # as other kills leave them
        (run.path / name).write_bytes(b"partial")
    summary, said = resume(m, spec, run.path.parents[2])
    assert "removed 4 temporary file(s)" in said and "from step 10" in said
    assert abs(summary["test_bits"] - straight()[0]["test_bits"]) < 1e-4
    assert not [p for p in run.path.rglob(".*") if p.name != ".lock"]


def test_a_crafted_checkpoint_is_refused_never_run(tmp_path, write_manifest, capsys):
    path = write_manifest()
    assert main(["run", str(path)]) == 0
    m = manifests.load(path)
    run = RunDir(tmp_path / "results", m.name, m.expand("tiny")[0].run_id)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    torch.save({"global_step": 20, "state_dict": {}, "x": Payload()}, run.last_checkpoint)
    run.update_summary(status="running")
    capsys.readouterr()
    for argv in (["run", str(path)], ["sample", run.run_id]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{run.last_checkpoint}: refused to load: it holds a reference to" in err[0]
    assert not marker.exists()


def test_corrupt_summary_and_spec_are_listed_and_redone(tmp_path, write_manifest, capsys):
    path = write_manifest(train=", seed: 0", grid="grid:\n  train.seed: [0, 1]\n")
    assert main(["run", str(path)]) == 0
    a, b = (RunDir(tmp_path / "results", s.manifest, s.run_id) for s in manifests.load(path).expand("tiny"))
    bits = a.summary()["test_bits"]
    summary_text = (a.path / "summary.json").read_text()
    (a.path / "summary.json").write_text(summary_text[: len(summary_text) // 2])
    (b.path / "spec.yaml").write_text("run_id: [unclosed\n")
    capsys.readouterr()
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert f"corrupt: {a.path / 'summary.json'}: corrupt" in out and f"corrupt: {b.path / 'spec.yaml'}: corrupt" in out
    assert main(["status", "f-run", "--json"]) == 0  # by name (the store knows it): stdout stays JSON
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and captured.err.count("corrupt: ") == 2
    assert main(["report", str(path)]) == 0
    assert "corrupt run, left out" in (tmp_path / "results" / "reports" / "f-run.md").read_text()
    assert main(["run", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{a.run_id}  f-run  seed=0  [corrupt summary: redone by run]" in out
    assert f"{b.run_id}  f-run  seed=1  [corrupt spec: redone by run]" in out
    source = tmp_path / "results" / "sources" / "f-run.json"
    source.write_text("{")  # a damaged name record is rewritten by the next run
    assert main(["run", str(path)]) == 0
    assert json.loads(source.read_text())["path"] == str(path.resolve())
    out = capsys.readouterr().out
    assert out.count(": the run is redone") == 2 and out.count("resuming") == 2
    assert a.summary()["status"] == b.summary()["status"] == "finished" and b.spec()["run_id"] == b.run_id
    assert abs(a.summary()["test_bits"] - bits) < 1e-9


@pytest.mark.parametrize("name", ["summary.json", "metrics.csv", "analysis.npz"])
def test_a_fifo_in_place_of_a_run_file_is_named_and_never_read(tmp_path, write_manifest, name):
    """A FIFO as a run's summary.json hung status, report, run and sample (a blocking read that no writer
    ends); as its metrics.csv, report. Then the metrics' FIFO made the whole report exit 2 (its curves did
    not read); now the run is left out in one line, by status and report alike, and the rest served."""
    path = write_manifest(top="renders: [curves]\n")
    (spec,) = manifests.load(path).expand("tiny")
    run = stored_run(tmp_path / "results", spec, valid_bits=2.5, test_bits=2.25)
    (run.path / name).unlink(missing_ok=True)  # a run of this family stores no analysis.npz
    os.mkfifo(run.path / name)
    status, report = repro_process(["status"]), repro_process(["report", str(path)])
    assert status.returncode == 0 and report.returncode == 0, (status, report)
    page = (tmp_path / "results" / "reports" / "f-run.md").read_text().splitlines()
    if name == "summary.json":  # a corrupt run: listed, left out, redone by run
        said = f"{run.path / name}: not a regular file; allowed: a regular file"
        assert f"corrupt: {said}" in status.stdout.splitlines(), status
        assert f"- corrupt run, left out (`repro run` redoes it): {said}" in page
        planned = repro_process(["run", str(path), "--dry-run"])
        assert planned.returncode == 0 and f"{run.run_id}  f-run  -  [corrupt summary: redone by run]" in planned.stdout
    else:  # its curves or figures would block: the run is left out, named (run does not redo a finished run)
        said = f"{run.path / name} is a FIFO, not a regular file: run left out"
        assert status.stdout.splitlines() == [f"damaged: {said}"], status
        assert f"- damaged run, left out: {said}" in page and "No stored runs yet" in "\n".join(page)
    assert stat.S_ISFIFO(os.stat(run.path / name).st_mode)  # left as it was: only run replaces it


def test_a_linked_run_folder_is_named_with_its_target_and_never_followed(tmp_path, straight):
    """A symbolic link in place of a stored run's folder (or a manifest's) was followed by status and
    report without a word: its run reported as if stored here. Now each says in one line what the link is
    and where it points and leaves it out; the link's target is neither read nor written."""
    summary, _ = straight()
    manifest = reported_copy(straight, tmp_path)
    run = RunDir(tmp_path / "results", "f-run", summary["run_id"])
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(run.path, elsewhere / "f-run" / run.run_id)  # a whole run: followed, it would read
    shutil.rmtree(run.path)
    run.path.symlink_to(elsewhere / "f-run" / run.run_id)
    other = tmp_path / "results" / "runs" / "other"
    other.symlink_to(elsewhere / "f-run")
    before = sorted((p.relative_to(elsewhere), p.stat().st_mtime_ns) for p in elsewhere.rglob("*"))
    status = repro_process(["status"])
    linked = f"linked: {run.path} is a link to {elsewhere / 'f-run' / run.run_id}: not read; a stored run is a folder of its own"
    manifest_linked = f"linked: {other} is a link to {elsewhere / 'f-run'}: not read; a manifest's runs are stored in a folder of its own"
    assert status.returncode == 0 and status.stdout.splitlines() == [linked, manifest_linked], status
    report = repro_process(["report", "--allow-read", str(straight.base), str(manifest)])
    assert report.returncode == 0 and report.stderr == "", report
    assert f"- {linked.replace('linked: ', 'linked run, left out: ', 1)}" in report.stdout.splitlines()
    assert "No stored runs yet: `repro run" in report.stdout and "| finished |" not in report.stdout
    assert sorted((p.relative_to(elsewhere), p.stat().st_mtime_ns) for p in elsewhere.rglob("*")) == before


def test_report_all_names_a_linked_run_and_a_fifo_and_reports_every_other_manifest(tmp_path):
    """`repro report --all` over a store with a run folder that is a link and a run whose metrics.csv is a
    FIFO: it followed the link in silence and exited 2 on the FIFO, writing no REPORT.md. Now it names both
    in one line each, leaves them out and reports the rest, exit 0."""
    root, found = tmp_path / "results", manifests.discover()
    runs = {
        name: stored_run(root, lookup.load(found[name]).expand("tiny")[0], valid_bits=2.0, test_bits=2.0)
        for name in ("smoke", "as-table1", "st-precision")
    }
    linked, fifo = runs["as-table1"], runs["st-precision"]
    target = tmp_path / "elsewhere" / linked.run_id
    target.parent.mkdir()
    shutil.move(linked.path, target)
    linked.path.symlink_to(target)
    fifo.metrics_path.unlink()
    os.mkfifo(fifo.metrics_path)
    lines = [
        f"linked: {linked.path} is a link to {target}: not read; a stored run is a folder of its own",
        f"damaged: {fifo.metrics_path} is a FIFO, not a regular file: run left out",
    ]
    done = repro_process(["report", "--all"])
    assert done.returncode == 0 and done.stderr == "", done
    assert done.stdout.splitlines() == [*lines, f"wrote {root / 'REPORT.md'}"]
    pages = {name: (root / "reports" / f"{name}.md").read_text() for name in runs}
    assert "| finished | file | 2 | 2 |" in pages["smoke"]  # its run's row
    assert f"- linked run, left out: {lines[0].split(': ', 1)[1]}" in pages["as-table1"]
    assert f"- damaged run, left out: {lines[1].split(': ', 1)[1]}" in pages["st-precision"]
    assert "No stored runs yet" in pages["as-table1"] and "No stored runs yet" in pages["st-precision"]
    assert "No stored runs yet" not in pages["smoke"]
    status = repro_process(["status"])
    assert status.returncode == 0 and status.stdout.splitlines()[-2:] == lines, status
    assert runs["smoke"].run_id in status.stdout and stat.S_ISFIFO(os.stat(fifo.metrics_path).st_mode)


def test_a_full_disk_fails_in_one_line_leaving_nothing_half_written(tmp_path, write_manifest, kid, capsys):
    path = write_manifest()
    m = manifests.load(path)
    spec = m.expand("tiny")[0]
    data.open_split(spec.data.name, "train", **spec.data.options())  # prepared first: the limit is the store's
    (tmp_path / "results").mkdir()
    sources = tmp_path / "results" / "sources"
    sources.write_text("")  # the manifest's record, written after the failure, cannot be written either
    code, _, err = kid(["run", str(path)], file_limit=100_000)  # a checkpoint is ~220 KB
    run = RunDir(tmp_path / "results", m.name, spec.run_id)
    assert code == 1  # the failure told is the checkpoint's, not the record's after it
    assert err.strip().splitlines()[-1] == f"error: {run.checkpoints / 'last.ckpt'}: cannot write: File too large"
    assert "Traceback" not in err
    assert not list(run.path.rglob("*.tmp")) and run.last_checkpoint is None
    assert run.summary()["status"] == "failed" and "File too large" in run.summary()["error"]
    sources.unlink()
    assert main(["run", str(path)]) == 0 and run.summary()["status"] == "finished"  # space again: it runs
    assert (sources / "f-run.json").is_file()


def test_a_read_only_results_directory_fails_in_one_line(corpus, write_manifest, kid, monkeypatch):
    base = Path(tempfile.mkdtemp())  # world-readable, unlike pytest's tmp dirs: another user reads it
    try:
        os.chmod(base, 0o755)
        monkeypatch.setenv("REPRO_DATA", str(base / "data"))
        monkeypatch.setenv("REPRO_RESULTS", str(base / "results"))
        shutil.copy(corpus, base / "corpus.txt")
        path = base / "m.yaml"
        path.write_text(write_manifest().read_text().replace(str(corpus), str(base / "corpus.txt")))
        spec = manifests.load(path).expand("tiny")[0]
        data.open_split(spec.data.name, "train", **spec.data.options())
        (base / "results").mkdir(mode=0o555)
        code, _, err = kid(["run", str(path)], as_user=None if os.geteuid() else 65534)
        assert code == 1
        run = RunDir(base / "results", "f-run", spec.run_id)
        assert err.strip().splitlines()[-1] == f"error: {run.path}: cannot create directory: Permission denied"
        assert "Traceback" not in err
        assert not any((base / "results").iterdir())
    finally:
        shutil.rmtree(base)


def test_a_run_folder_this_user_may_not_read_is_listed_and_the_rest_served(straight, kid, monkeypatch):
    summary, _ = straight()
    base = Path(tempfile.mkdtemp())  # world-readable, unlike pytest's tmp dirs: another user reads it
    try:
        os.chmod(base, 0o755)
        shutil.copytree(straight.base / "results", base / "results")
        for folder in [base / "results", *(base / "results").rglob("*")]:
            os.chmod(folder, 0o777 if folder.is_dir() else 0o644)  # the index and the report may be written
        shutil.copy(straight.base / "corpus.txt", base / "corpus.txt")
        manifest = base / "m.yaml"
        manifest.write_text((straight.base / "dense.yaml").read_text().replace(str(straight.base), str(base)))
        monkeypatch.setenv("REPRO_RESULTS", str(base / "results"))
        closed = [base / "results" / "runs" / "f-run" / "0123456789ab", base / "results" / "runs" / "other"]
        for folder in closed:
            folder.mkdir(mode=0o000)
        user = None if os.geteuid() else 65534  # root reads a folder at mode 000: the test runs as nobody
        code, out, err = kid(["status"], as_user=user)
        assert code == 0 and err == "" and summary["run_id"] in out, err
        assert [line for line in out.splitlines() if line.startswith("unreadable")] == [
            f"unreadable: {closed[0]}: Permission denied",
            f"unreadable: {closed[1]}: Permission denied",
        ]
        code, out, err = kid(["status", "--json"], as_user=user)
        assert code == 0 and [r["run_id"] for r in json.loads(out)] == [summary["run_id"]]
        assert err.splitlines() == [
            f"unreadable: {closed[0]}: Permission denied",
            f"unreadable: {closed[1]}: Permission denied",
        ]
        code, out, err = kid(["report", str(manifest)], as_user=user)
        assert code == 0 and "Traceback" not in err, err
        report = (base / "results" / "reports" / "f-run.md").read_text()
        assert f"- unreadable run, left out (this user may not read it): {closed[0]}: Permission denied" in report
        assert f"| finished | corpus.txt@{summary['dataset'].split('@')[1]} |" in report  # the readable run's row
    finally:
        shutil.rmtree(base)


def test_files_and_directories_follow_the_umask(tmp_path, write_manifest, kid):
    path = write_manifest()
    code, _, err = kid(["run", str(path), "--max-steps", "6"], umask=0o027)
    assert code == 0, err
    run = next((tmp_path / "results" / "runs" / "f-run").iterdir())
    (dataset,) = (p for p in (tmp_path / "data" / "file").iterdir() if p.is_dir())
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in [run, run / "checkpoints", dataset]}
    modes.update(
        {p: stat.S_IMODE(p.stat().st_mode) for p in [*run.glob("*.*"), *run.glob("checkpoints/*"), *dataset.iterdir()]}
    )
    assert len(modes) >= 12
    assert all(mode == (0o750 if p.is_dir() else 0o640) for p, mode in modes.items()), modes


def test_atomic_writes_fsync_the_file_before_the_rename_and_the_directory_after(tmp_path, monkeypatch):
    events = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(
        os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), fsync(fd))[1]
    )
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a), str(b))), replace(a, b))[1])
    target = tmp_path / "summary.json"
    atomic.write_bytes(target, b"{}")
    (_, tmp), (_, src, dst), (_, directory) = events
    assert src == tmp and dst == str(target) and directory == str(tmp_path)


def test_a_corrupt_dataset_is_one_line_before_training(tmp_path, write_manifest, corpus, capsys):
    text8 = tmp_path / "data" / "text8"
    text8.mkdir(parents=True)
    (text8 / "meta.json").write_text('{"vocab": {"size": 27')
    assert main(["data", "list"]) == 0
    assert f"corrupt: {text8 / 'meta.json'}: corrupt" in capsys.readouterr().out
    assert main(["data", "verify", "text8"]) == 2
    assert capsys.readouterr().err.count("\n") == 1

    path = write_manifest()
    spec = manifests.load(path).expand("tiny")[0]
    directory = data.dataset_dir("file", **spec.data.options())
    data.open_split("file", "train", **spec.data.options())
    leftover = directory.parent / f".{directory.name}.building-x1"  # a preparation killed half-way
    leftover.mkdir()
    valid = directory / "valid.npy"
    valid.write_bytes(b"\x93NUMPY garbage" + valid.read_bytes()[14:])
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{valid}: corrupt" in err[0] and "repro data prepare file" in err[0]
    assert not (tmp_path / "results").exists()
    assert main(["data", "prepare", "file", "--from", str(corpus), "--kind", "text8"]) == 0
    assert not leftover.exists() and main(["run", str(path)]) == 0


def test_an_error_after_training_started_marks_the_run_failed(tmp_path, write_manifest, monkeypatch):
    path = write_manifest()
    m = manifests.load(path)
    (spec,) = m.expand("tiny")

    def broken(*args, **kwargs):
        raise RuntimeError("evaluation broke")

    monkeypatch.setattr(finish, "evaluate", broken)
    with pytest.raises(RuntimeError):
        runner.run_spec(spec, m, tmp_path / "results", echo=lambda s: None)
    summary = RunDir(tmp_path / "results", m.name, spec.run_id).summary()
    assert summary["status"] == "failed" and summary["error"] == "evaluation broke"


def test_verify_names_a_fifo_in_place_of_the_stored_metrics_or_arrays(tmp_path):
    """`repro verify` compares the stored metrics.csv and analysis.npz with the re-executed run's: a FIFO in
    their place hung it (a blocking open); now it is named as not a regular file (in a process, so that a
    hang fails by the timeout rather than stalling the suite)."""
    for name in ("metrics.csv", "analysis.npz"):
        os.mkfifo(tmp_path / name)
    (tmp_path / "x").write_bytes(b"")  # the re-executed run's arrays: present, so the stored ones are read
    code = (
        "import sys; from pathlib import Path; from repro.replay import compare; from repro.store.runs import CorruptFile\n"
        "d = Path(sys.argv[1])\n"
        "for call in (lambda: compare._rows(d / 'metrics.csv'), lambda: list(compare._arrays(d / 'analysis.npz', d / 'x'))):\n"
        "    try: call()\n"
        "    except CorruptFile as err: print(err)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == [
        f"{tmp_path / n}: not a regular file; allowed: a regular file" for n in ("metrics.csv", "analysis.npz")
    ], done.stderr
