"""Nothing written half, nothing dropped silently, nothing resumed from another run, nothing W&B lacks
(issue 22): a report killed mid-figure keeps the old figure; a damaged metrics.csv keeps its readable
rows and says what it set aside; a checkpoint of another run is refused; after a kill -9 and a resume
W&B holds every row the store holds."""

from __future__ import annotations

import shutil
import signal

import pytest
from faultkit import SignalAt, reported_copy

from repro.cli import main
from repro.config import manifest as manifests
from repro.store.runs import RunDir
from repro.track import wandb_log
from repro.track.loggers import STEP
from repro.train import runner


def test_a_report_killed_while_writing_a_figure_keeps_the_previous_one(tmp_path, straight, kid, capsys):
    straight()
    manifest = reported_copy(straight, tmp_path)
    argv = ["--allow-read", str(straight.base), "report", str(manifest)]
    assert main(argv) == 0
    figure = tmp_path / "results" / "reports" / "figures" / "f-run-curves-tiny.png"
    before = figure.read_bytes()
    code, _, _ = kid(argv, kill_in_savefig=True)
    assert code == -signal.SIGKILL
    assert figure.read_bytes() == before  # the old figure whole; the half one was a temp file
    assert main(argv) == 0 and figure.read_bytes()[:4] == b"\x89PNG"
    assert not list(figure.parent.glob(".*.tmp"))  # the next report removed what the killed one left


def test_a_damaged_metrics_file_keeps_its_readable_rows_and_says_so(tmp_path, write_manifest, kid, straight):
    path = write_manifest()
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    code, _, _ = kid(["run", str(path)], callbacks=[SignalAt(12, signal.SIGKILL)])
    assert code == -signal.SIGKILL
    run = RunDir(tmp_path / "results", m.name, spec.run_id)
    good = run.metrics_path.read_bytes().splitlines(keepends=True)
    assert len(good) >= 5
    run.metrics_path.write_bytes(b"".join([*good[:2], b"\x00\xff garbage, 1, 2\n", b'4,"3.1\n', *good[2:]]))
    for i, damaged in enumerate((b"", good[0])):  # empty, header only
        shutil.copytree(tmp_path / "results", tmp_path / f"copy{i}")
        said = []
        other = RunDir(tmp_path / f"copy{i}", m.name, spec.run_id)
        other.metrics_path.write_bytes(damaged)
        other.cut_metrics(10, said.append)
        assert said == [f"  {other.metrics_path}: no row before step 10 (empty): those metrics are lost"]
    said = []
    summary = runner.run_spec(spec, m, tmp_path / "results", echo=said.append).summary
    lines = [s for s in said if "do not read" in s]
    assert len(lines) == 1 and "2 line(s) do not read: set aside in" in lines[0] and "kept" in lines[0], said
    assert (run.path / run.UNREADABLE).read_bytes().count(b"\n") == 2
    reference = straight()
    assert abs(summary["test_bits"] - reference[0]["test_bits"]) < 1e-4
    assert list(run.metrics()["step"]) == list(reference[1]["step"])  # every good row kept, none twice


def test_a_checkpoint_of_another_run_is_refused(tmp_path, write_manifest, kid, capsys):
    path = write_manifest(train=", seed: 0", grid="grid:\n  train.seed: [0, 1]\n")
    first, second = manifests.load(path).expand("tiny")
    code, _, _ = kid(["run", str(path)], callbacks=[SignalAt(12, signal.SIGKILL)])
    assert code == -signal.SIGKILL
    a = RunDir(tmp_path / "results", first.manifest, first.run_id)
    b = RunDir(tmp_path / "results", second.manifest, second.run_id)
    b.checkpoints.mkdir(parents=True)
    shutil.copy(a.last_checkpoint, b.checkpoints / "last.ckpt")  # seed 0's state, offered to seed 1
    capsys.readouterr()
    assert main(["run", str(path), "--only", "seed=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: {b.checkpoints / 'last.ckpt'}: a checkpoint of run {first.run_id!r}, not of run {second.run_id}: "
        "refused (delete it to restart the run)"
    ]
    assert not b.metrics_path.exists() and "status" not in b.summary()


def damage_a_value(log) -> None:
    """Overwrite the JSON of one history value of W&B's log in place (its framing and protobuf stay valid)."""

    def history_values() -> list[str]:
        return [
            item.value_json
            for record in wandb_log.records(log)
            if record.WhichOneof("record_type") == "history"
            for item in record.history.item
            if list(item.nested_key) == ["train/bits"]
        ]

    value = history_values()[0]
    log.write_bytes(log.read_bytes().replace(value.encode(), b"#" * len(value)))  # its summary's copy too
    assert history_values()[0] == "#" * len(value)


@pytest.mark.parametrize(
    "stop, code, damage",  # kill -9: W&B's buffers lost; SIGTERM: W&B's log whole, then damaged
    [(signal.SIGKILL, -signal.SIGKILL, "cut short"), (signal.SIGTERM, 143, "a value overwritten")],
)
def test_wandb_holds_every_row_of_the_store_after_a_kill_and_a_resume(
    tmp_path, write_manifest, kid, monkeypatch, stop, code, damage
):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    path = write_manifest()
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    stopped, _, err = kid(["run", str(path)], callbacks=[SignalAt(12, stop)])
    assert stopped == code, err
    run = RunDir(tmp_path / "results", m.name, spec.run_id)
    wandb_id = run.summary()["wandb_run_id"]
    (log,) = (tmp_path / "results" / "wandb").glob(f"offline-run-*-{wandb_id}/run-{wandb_id}.wandb")
    if damage == "cut short":
        raw = log.read_bytes()
        log.write_bytes(raw[: len(raw) // 3])  # what W&B had not written yet when the kill came
    else:
        damage_a_value(log)  # a JSONDecodeError failed every resume, the run left `running`
    code, out, err = kid(["run", str(path)])
    assert code == 0, err
    assert "W&B lacked" in out and "sent again" in out
    rows = wandb_log.history(tmp_path / "results" / "wandb", wandb_id)
    held = {int(row[STEP]) for row in rows if "train/bits" in row}
    stored = set(run.metrics().dropna(subset=["train/bits"])["step"].astype(int))
    assert stored and stored <= held, sorted(stored - held)
