"""A researcher's first day, round two (issue 36): `show`, `validate` and `list` agree with `run`; groups by
scale; shortened runs found; an estimate before the wait."""

from __future__ import annotations

import shutil

from repro.cli import main
from repro.config import manifest as manifests


def test_show_has_a_seed_column_one_steps_column_and_takes_seeds(capsys):
    assert main(["show", "as-table1", "--seeds", "2", "train.steps=100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[1].split()
    assert header.count("seed") == 1 and header.count("steps") == 1 and "train.steps" not in header
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == 8  # 4 cells (the three rows and the fixed window of R) x 2 seeds
    seeds = [row[header.index("seed")] for row in rows]
    assert sorted(seeds) == ["0"] * 4 + ["1"] * 4
    assert {row[header.index("steps")] for row in rows} == {"100"}
    assert main(["show", "as-table1", "--seeds", "0"]) == 2
    assert "--seeds 0: allowed: a positive number" in capsys.readouterr().err


def _broken_experiments(tmp_path, monkeypatch):
    folder = tmp_path / "experiments"
    folder.mkdir()
    shutil.copy(manifests.discover()["smoke"], folder / "smoke.yaml")
    (folder / "a.yaml").write_text("name: bad-a\ntitle: x\n")
    (folder / "b.yaml").write_text("name: bad-b\npaper: suite\n")
    monkeypatch.setenv("REPRO_EXPERIMENTS", str(folder))
    return folder


def test_validate_checks_every_manifest_and_reports_every_failure(tmp_path, monkeypatch, capsys):
    folder = _broken_experiments(tmp_path, monkeypatch)
    assert main(["validate"]) == 2
    captured = capsys.readouterr()
    errors = captured.err.strip().splitlines()
    assert errors == [
        f"error: {folder / 'a.yaml'}: paper: required key is missing",
        f"error: {folder / 'b.yaml'}: title: required key is missing",
    ]
    assert "ok  smoke" in captured.out and "2 of 3 manifests invalid" in captured.out


def test_list_puts_invalid_messages_under_the_table(tmp_path, monkeypatch, capsys):
    _broken_experiments(tmp_path, monkeypatch)
    assert main(["list", "--results", str(tmp_path / "results")]) == 0
    lines = capsys.readouterr().out.splitlines()
    table, below = lines[:4], lines[4:]
    assert all("required key" not in line for line in table)
    assert [line.split()[:3] for line in table[1:3]] == [
        ["bad-a", "INVALID", "(below)"],
        ["bad-b", "INVALID", "(below)"],
    ]
    assert below[:2] == [
        f"INVALID bad-a: {tmp_path / 'experiments' / 'a.yaml'}: paper: required key is missing",
        f"INVALID bad-b: {tmp_path / 'experiments' / 'b.yaml'}: title: required key is missing",
    ]


def test_a_group_runs_the_parts_that_have_the_scale_and_names_those_left_out(tmp_path, capsys):
    results = str(tmp_path / "results")
    assert main(["run", "table1", "--scale", "cpu", "--dry-run", "--results", results]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "left out, no scale 'cpu': st-table1-enwik8, st-table1-imagenet64, st-table1-audio"
    runs, estimate = out[2:-1], out[-1]
    assert runs and all(" as-table1 " in line or " st-table1-cifar10 " in line for line in runs)
    assert any(" st-table1-cifar10 " in line for line in runs) and estimate.startswith("ETA ")
    assert main(["show", "table1", "--scale", "cpu"]) == 0
    assert "as-table1: " in capsys.readouterr().out
    # none of them has the scale: one line naming each one's scales
    assert main(["run", "st-table1", "--scale", "pretrained", "--dry-run", "--results", results]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none of the 4 manifests has this scale" in err[0] and "st-table1-audio: tiny" in err[0]


def test_a_report_without_runs_names_the_derived_manifests_that_have_some(tmp_path, write_manifest):
    """Runs trained with `train.steps=20` are stored under the derived manifest: the base's report (and a
    sibling's) names it, with its finished runs and the command that reports it."""
    from spine_manifests import stored_run

    from repro.config import lookup
    from repro.report.relatives import elsewhere, relatives_with_runs
    from repro.store.runs import record_source, sources

    path = write_manifest()
    root = tmp_path / "results"
    base = lookup.select(str(path), [])[0]
    assert elsewhere(base, root) == []  # nothing stored anywhere
    (short,) = lookup.select(str(path), ["train.steps=20"])
    assert short.name == "t-tiny.train.steps_20" and lookup.base_name(short) == "t-tiny"
    for spec in short.expand("tiny"):
        stored_run(root, spec, valid_bits=3.0)
    record_source(root, short.name, path, short.args)
    assert elsewhere(base, root) == [
        "Stored runs of the same manifest with other overrides (each its own report):",
        "",
        "- `t-tiny.train.steps_20`: 1 finished run(s); `repro report t-tiny.train.steps_20`",
        "",
    ]
    (sibling,) = lookup.select(str(path), ["train.steps=25"])
    assert [name for name, _ in relatives_with_runs(sibling, root)] == ["t-tiny.train.steps_20"]
    assert elsewhere(short, root) == []  # its own runs are no relative's
    # the command printed reports them: the store knows the derived manifest by its name
    stored = lookup.Stored(sources(root))
    assert [m.name for m in lookup.select("t-tiny.train.steps_20", [], stored)] == [short.name]


def test_the_plan_eta_comes_from_stored_runs_of_the_same_shape(tmp_path, write_manifest):
    """Before the first step: a run whose shape (data, model, batch, evaluation; not the seed, the steps
    or the learning rate) was stored is timed at that run's seconds per step and evaluation seconds; one
    whose evaluation was never timed at the stored runs' median rate; one of a new shape is named apart."""
    from spine_manifests import stored_run

    from repro.config import lookup
    from repro.plan import eta

    path = write_manifest(grid="grid:\n  train.lr: [0.003, 0.001]\n  model.d_model: [32, 64]\n")
    root, shipped = tmp_path / "results", tmp_path / "shipped"
    specs = lookup.select(str(path), [])[0].expand("tiny")
    by_cell = {(s.cell["train.lr"], s.cell["model.d_model"]): s for s in specs}
    # d_model 32 timed under the root trained into (lr 0.003 only: lr 0.001 has its shape)
    stored_run(root, by_cell[0.003, 32], seconds_per_step=0.5, eval_seconds=20.0, valid_targets=640, test_targets=640)
    assert eta.plan([by_cell[0.001, 32]], eta.Timings([root])) == (
        f"ETA 35s for 1 run(s), from stored runs of the same shape under {root}/"  # 30 steps x 0.5 s + 20 s
    )
    # d_model 64 only in the shipped store, its evaluation untimed: 1280 targets = 10 steps of 4 x 32
    # tokens, at the median ratio 20 / (10 x 0.5) = 4 -> 4 x 10 x 1.0 = 40 s
    stored_run(shipped, by_cell[0.003, 64], seconds_per_step=1.0, valid_targets=640, test_targets=640)
    timings = eta.Timings([root, shipped])
    assert timings.of(by_cell[0.001, 64].resolved()) == eta.Timing(1.0, 40.0 / 1280, 1280, True, 1, shipped)
    new_shape = lookup.select(str(path), ["train.batch_size=8"])[0].expand("tiny")[0]
    text = eta.plan([by_cell[0.001, 32], by_cell[0.001, 64], new_shape], timings)
    assert text == (
        f"ETA 1m45s for 2 run(s), from stored runs of the same shape under {root}/ (1), {shipped}/ (1) "
        "(1 evaluation(s) not timed there: estimated from their size); + 1 run(s) of a shape never stored: "
        "their lines give their ETA after their first steps"
    )
    assert eta.plan([new_shape], timings).startswith("ETA unknown: no stored run of the same shape")


def test_progress_lines_come_early_then_every_quarter_and_at_the_end():
    from repro.progress import Lines

    now = [0.0]
    shown: list[str] = []
    lines = Lines("evaluating valid", 2000, "targets", echo=shown.append, clock=lambda: now[0])
    for _ in range(40):  # 50 targets a second
        now[0] += 1.0
        lines.update(50)
    assert shown == [
        "  evaluating valid 50/2.0k targets  ETA 39s",  # the first 1%: an early rate
        "  evaluating valid 550/2.0k targets  ETA 29s",  # then every quarter after it
        "  evaluating valid 1.1k/2.0k targets  ETA 19s",
        "  evaluating valid 1.6k/2.0k targets  ETA 9s",
        "  evaluating valid 2.0k/2.0k targets  ETA 0s",
    ]
