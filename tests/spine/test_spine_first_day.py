"""A researcher's first day (issue 23): reports read at a glance and commands without dead ends."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings

import pandas as pd
import pytest
from spine_manifests import shipped, stored_run

from repro.claims import gates as verdicts
from repro.config import lookup
from repro.config import manifest as manifests
from repro.config.cells import cell_text, value_text
from repro.report import prune

ROW = {"name": "moh-audio", "seq_len": 1024, "block": 1024}


def test_grid_values_read_as_the_manifest_writes_them():
    assert value_text(ROW) == "name=moh-audio seq_len=1024 block=1024"
    assert value_text([1, 2]) == "1,2" and value_text(2e-6) == "2e-06"
    assert cell_text({"data": ROW, "model.d_model": 32}) == "name=moh-audio seq_len=1024 block=1024 d_model=32"


def test_evidence_shows_cells_by_their_values_once():
    runs = pd.DataFrame(
        [
            {"data": {**ROW, "seq_len": n}, "model.d_model": d, "status": "finished", "valid_bits": b}
            for n, d, b in [(1024, 32, 7.5), (1024, 96, 7.4), (4096, 32, 7.7), (4096, 96, 6.9)]
        ]
    )
    keys = ["data", "model.d_model"]
    verdict = verdicts.evaluate("valid_bits[d_model=96] <= valid_bits[d_model=32]", runs, keys)
    assert "{'" not in verdict.detail and "name=moh-audio seq_len=4096 block=1024: 6.9" in verdict.detail
    twice = verdicts.evaluate("max(valid_bits[]) - min(valid_bits[]) < 0.1", runs, keys)
    assert twice.detail.count("valid_bits[] =") == 1
    assert "d_model=96: 6.9" in twice.detail  # two free keys: each named


def test_one_definition_of_learned():
    runs = pd.DataFrame(
        [
            {"model.pattern": p, "status": "finished", "valid_bits": b, "unigram_bits": 4.887}
            for p, b in [("dense", 3.937), ("strided", 3.874)]
        ]
    )
    keys = ["model.pattern"]
    assert verdicts.evaluate("learned[pattern=strided]", runs, keys).holds
    every = verdicts.evaluate("learned[]", runs, keys)
    assert every.status == "indicative (one seed)" and not every.holds and every.detail.endswith("fails at dense")
    # a claim that the model learned is judged, not made not evaluable by the same precondition
    assert verdicts.evaluate("learned[]", runs, keys, ["learned[]"]).holds is False


def test_every_shipped_learned_check_is_the_shared_one():
    for name, path in shipped().items():
        m = lookup.load(path)
        for claim in m.claims:
            for check in [*claim.requires, claim.check]:
                if "unigram_bits" in check or claim.id == "learns":
                    assert check in ("learned[]", "learned_test[]"), (name, claim.id, check)


@pytest.mark.parametrize("command", [["list"], ["status"]])
def test_a_reader_that_leaves_early_is_no_error(command):
    """`repro list | head -1`: the pipe closes before repro writes; it exits 0 without a traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "repro", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and err == ""


def test_a_derived_report_says_what_is_there_and_what_fills_it(tmp_path, write_manifest):
    """Only `--max-steps` runs of a `-m` derived manifest are stored: its report says it is derived, that
    none of its runs is stored and which command trains them; claims name the command, not a dict."""
    from repro.config.capped import with_max_steps
    from repro.report import stage

    claims_text = "claims:\n  - {id: c, text: short stride wins, check: 'test_bits[stride=8] < test_bits[stride=16]'}\n"
    notes = "notes: |\n  Trained 30 steps.\n  Stride 16 is sqrt(256).\n"
    path = write_manifest(grid="grid:\n  model.stride: [16, 8]\n", claims=claims_text + notes)
    root = tmp_path / "results"
    (m,) = lookup.select(str(path), ["-m", "model.stride=8,16", "train.steps=20"])
    for spec in m.expand("tiny"):
        stored_run(root, with_max_steps(spec, 5), test_bits=3.0)
    page, results = stage.render(m, root)
    text = page.read_text()
    assert "**Derived** from `m.yaml` with `train.steps=20 model.stride=8,16`" in text
    assert "dataset: ?" not in text and "no run of the current resolution stored" in text
    fill = f"`repro run {m.command} --scale tiny`"
    assert f"None of the 2 run(s) of the current resolution is stored: {fill} trains them" in text
    assert [r.verdict.detail for r in results] == [f"no run of the current resolution is stored: {fill}"]
    assert "[{" not in text and "{}" not in text
    # the base file's notes (its 30 steps, not these 20) are shown as that file's, quoted
    assert "## Notes of `m.yaml`" in text and "## Notes\n" not in text
    assert "> Trained 30 steps.\n> Stride 16 is sqrt(256)." in text


def test_tables_of_manifests_with_dots_in_their_names_never_collide(tmp_path):
    """`write_table` appends .md/.csv: a derived manifest's dotted name keeps its scale and stem."""
    from types import SimpleNamespace

    from repro.report.renderers import Context

    written = set()
    for name in (
        "as-ablate-ramp.model.span.ramp_16_48.train.steps_30",
        "as-ablate-ramp.model.span.ramp_16_48.train.steps_40",
    ):
        for scale in ("tiny", "cpu"):
            for stem in ("ramp", "other"):
                ctx = Context(SimpleNamespace(name=name), pd.DataFrame(), scale, tmp_path)
                md = ctx.write_table(stem, pd.DataFrame({"a": [1]}), "t", label="l")
                assert md.name == f"{name}-{stem}-{scale}.md" and md.with_name(md.name[:-3] + ".csv").is_file()
                written.add(md)
    assert len(written) == 8


def test_report_all_removes_figures_no_report_references(tmp_path, capsys):
    from repro.cli import main

    root = tmp_path / "results"
    figures = root / "reports" / "figures"
    figures.mkdir(parents=True)
    for name in ("as-fig1-fig1-0123456789ab-tiny", "st-fig2-fig2-tiny"):
        for ext in ("png", "pdf"):
            (figures / f"{name}.{ext}").write_bytes(b"x")
    (root / "reports" / "cpu-scale.md").write_text("kept: ![a figure](figures/st-fig2-fig2-tiny.png)\n")
    part = lookup.load(manifests.discover()["st-table1-audio"])
    stored_run(root, part.expand("tiny")[0], valid_bits=5.6, test_bits=5.3, unigram_bits=7.7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "No artists with labels" among them
        assert main(["report", "--all"]) == 0
    assert "removed 2 file(s)" in capsys.readouterr().out
    assert not list(figures.glob("as-fig1-fig1-0123456789ab-tiny.*"))
    assert sorted(p.name for p in figures.glob("st-fig2-fig2-*")) == ["st-fig2-fig2-tiny.pdf", "st-fig2-fig2-tiny.png"]
    assert not prune.unreferenced(root)  # every file a report wrote is linked from one
    text = (root / "reports" / "claims.md").read_text()  # every artefact's claims, off REPORT.md's headlines
    assert (
        "`st-table1` — gathers `st-table1-cifar10`, `st-table1-enwik8`, `st-table1-imagenet64`, `st-table1-audio`; their runs stored at: tiny"
        in text
    )


def test_status_shows_cells_seeds_steps_so_far_and_a_gathering_manifests_parts(tmp_path, capsys, write_manifest):
    from repro.cli import main
    from repro.store.runs import RunDir

    root = tmp_path / "results"
    part = lookup.load(manifests.discover()["st-table1-cifar10"])
    stored_run(root, part.expand("tiny")[0], valid_bits=3.9)
    m = lookup.load(write_manifest(grid="grid:\n  model.stride: [16, 8]\n"))
    done, stopped = m.expand("tiny")
    stored_run(root, done, test_bits=2.5)
    RunDir(root, m.name, stopped.run_id).write_spec(
        {"run_id": stopped.run_id, "manifest": m.name, "scale": "tiny", "cell": stopped.cell, **stopped.resolved()}
    )
    RunDir(root, m.name, stopped.run_id).write_summary({"status": "interrupted", "scale": "tiny"})
    RunDir(root, m.name, stopped.run_id).append_metrics(
        [{"step": 4, "train/bits": 4.0}, {"step": 9, "train/bits": 3.5}]  # logged at steps 5 and 10, from 0
    )
    assert main(["status"]) == 0
    lines = {line.split()[1]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines[done.run_id][2:6] == ["stride=16", "0", "tiny", "finished"]
    assert lines[stopped.run_id][2:7] == ["stride=8", "0", "tiny", "interrupted", "10/30"]
    for group in ("st-table1", "table1"):
        assert main(["status", group]) == 0
        out = capsys.readouterr().out
        assert "st-table1 trains nothing; it gathers 4 manifests: st-table1-cifar10," in out
        assert f"st-table1-cifar10  {part.expand('tiny')[0].run_id}  -" in out


def test_a_legend_only_where_something_is_labelled():
    from repro.report.renderers import legend, pyplot

    plt = pyplot()
    fig, (empty, drawn) = plt.subplots(1, 2)
    drawn.plot([0, 1], [1, 0], label="a run")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        legend(empty, fontsize=7)
        legend(drawn, fontsize=7)
    assert empty.get_legend() is None and drawn.get_legend() is not None
    plt.close(fig)


def test_only_runs_the_cells_the_overrides_leave_valid(capsys, write_manifest):
    """An override that makes one cell invalid (final_phase beyond its steps) leaves that cell out, says
    why, and --only runs the others; an override that leaves no valid cell is the error it was."""
    from repro.cli import main

    path = write_manifest(grid="grid:\n  train.steps: [30, 60]\n")
    assert main(["run", str(path), "train.final_phase=40", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0].startswith("left out, its overrides make this cell invalid: ")
        and "(scale tiny, grid cell steps=30)" in out[0]
    )
    assert len(out) == 3 and "steps=60  [to run]" in out[1] and out[2].startswith("ETA unknown")
    assert main(["run", str(path), "train.final_phase=40", "--only", "steps=60", "--dry-run"]) == 0
    assert "left out" not in capsys.readouterr().out  # --only excluded it anyway
    assert main(["run", str(path), "train.final_phase=90", "--dry-run"]) == 2
    assert (
        "train.final_phase: got 90; allowed: <= train.steps = 30 (scale tiny, grid cell steps=30)"
        in capsys.readouterr().err
    )


def test_a_run_prints_only_the_suites_lines_then_its_checkpoint_is_retrained_and_sampled(
    tmp_path, capsys, write_manifest, isolated_env
):
    """A real tiny run with W&B offline prints none of the libraries' chatter; with its checkpoint gone
    (as in a clone), `repro sample` names the command that brings it back, which retrains the run, checks
    the stored bits and keeps the checkpoint; then samples longer than a block come back, all of them,
    each after the prompt."""
    import os
    import shutil

    from repro.cli import main
    from repro.store.runs import RunDir

    path = write_manifest()
    env = {**os.environ, **isolated_env, "WANDB_MODE": "offline"}
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "run", str(path)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = proc.stdout + proc.stderr
    for chatter in ("anonymous setting", "litlogger", "LeafSpec", "No artists with labels"):
        assert chatter not in shown, chatter
    assert "ETA" in shown and "finished:" in shown
    # issue 49.5: where the offline W&B runs go is said, and the analysis arrays W&B keeps are a copy
    assert f"W&B offline: runs logged under {tmp_path / 'results' / 'wandb'}/ (`repro sync` uploads them" in shown
    (kept,) = (tmp_path / "results" / "wandb").glob("offline-run-*/files/analysis.npz")
    assert not kept.is_symlink() and kept.stat().st_size > 0

    (spec,) = lookup.load(path).expand("tiny")
    run = RunDir(tmp_path / "results", spec.manifest, spec.run_id)
    stored = run.summary()
    assert stored["eval_seconds"] >= 0  # what the next plan's ETA adds per run
    shutil.rmtree(run.checkpoints)
    assert main(["sample", spec.run_id]) == 2
    err = capsys.readouterr().err
    command = f"repro run {spec.manifest} --scale tiny --run-id {spec.run_id} --retrain-checkpoint"
    assert f"`{command}` trains it again" in err
    assert main([*command.split()[1:2], str(path), *command.split()[3:]]) == 0  # the manifest by its path here
    assert "checkpoint retrained and kept (valid_bits" in capsys.readouterr().out
    assert run.last_checkpoint is not None and run.summary() == stored  # the stored run untouched
    assert not (tmp_path / "results" / ".retrain").exists()

    assert main(["sample", spec.run_id, "--n", "3", "--length", "70", "--prompt", "the history of "]) == 0
    out = capsys.readouterr().out
    samples = out.split("--- sample ")[1:]
    assert len(samples) == 3 and samples[2].startswith("3 of 3 (70 symbols after the prompt)")
    for text in samples:
        body = text.split("---\n", 1)[1].rstrip("\n")
        assert body.startswith("the history of ") and len(body) == len("the history of ") + 70


def test_a_benchmark_never_replaces_the_stored_record_unless_asked(tmp_path):
    from repro.cli.bench import target
    from repro.cli.parser import build_parser
    from repro.errors import UserError

    stored = tmp_path / "bench" / "attention.json"
    assert target(tmp_path, "attention", None, False) == stored  # nothing there yet
    stored.parent.mkdir()
    stored.write_text("[]\n")
    beside = target(tmp_path, "attention", None, False)
    assert beside.parent == stored.parent and beside.name.startswith("attention.2") and beside.suffix == ".json"
    assert target(tmp_path, "attention", None, True) == stored
    with pytest.raises(UserError, match="--out .*: the file exists; pass --replace"):
        target(tmp_path, "attention", str(stored), False)
    args = build_parser().parse_args(["bench", "attention", "--out", "x.json", "--replace"])
    assert args.out == "x.json" and args.replace


MEASURED = re.compile(r"\b(measured|tiny reading|reading the|observ\w*|honestly|came out|we got|gave)\b[^.;]*\d", re.I)
OUR_BITS = re.compile(
    r"\b\d\.\d{2,}\b[^.;]*\b(dev|test|valid) bits\b|\b(dev|test|valid) bits\b[^.;]*\b\d\.\d{2,}", re.I
)


def test_notes_say_what_was_chosen_not_what_was_measured():
    """Measured numbers live in the reports (regenerated from the store); a manifest's notes that quoted
    them would contradict the report printed beside them once the runs change."""
    for name, path in shipped().items():
        notes = " ".join(manifests.load(path).notes.split())
        for sentence in re.split(r"(?<=[.;])\s", notes):
            if "paper" in sentence.lower():
                continue  # the paper's numbers are the reference, not ours
            assert not MEASURED.search(sentence), (name, sentence)
            assert not OUR_BITS.search(sentence), (name, sentence)


def test_help_opens_with_what_the_tool_does_and_the_first_commands():
    from repro.cli.parser import build_parser

    text = build_parser().format_help()
    opening = text.split("\n\n", 1)[1]
    assert opening.startswith("Reproduce the tables and figures of Adaptive Attention Span")
    steps = opening.split("first steps:", 1)[1].split("\n\n")[0]
    assert [line.split()[:3] for line in steps.strip().splitlines()] == [
        ["repro", "list", "every"],
        ["repro", "run", "smoke"],  # a first run that trains, into a fresh root
        ["repro", "report", "smoke"],
        ["repro", "report", "as-table1"],  # the shipped runs
        ["repro", "run", "as-table1"],
    ]
