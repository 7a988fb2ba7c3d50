"""A researcher's first day, round three (issue 49, points 1-5): every command a line suggests works, and a
rerun that cannot give a stored run's bits says when and why."""

from __future__ import annotations

import json
import shutil

import pytest

from repro.cli import main
from repro.config import lookup
from repro.store.runs import RunDir


def _edit(run: RunDir, code_version: str | None = None, **summary) -> None:
    """Change a stored run as a clone from another machine or code would hold it: its spec's code_version
    (not part of the run id) and numbers of its summary."""
    if code_version is not None:
        spec = run.path / "spec.yaml"
        lines = spec.read_text().splitlines()
        spec.write_text(
            "\n".join(f"code_version: {code_version}" if line.startswith("code_version:") else line for line in lines)
            + "\n"
        )
    stored = run.summary()
    (run.path / "summary.json").write_text(json.dumps({**stored, **summary}))


@pytest.fixture
def trained(tmp_path, write_manifest, capsys):
    """A tiny run trained into the test's results root, its checkpoint gone (as in a clone)."""
    path = write_manifest()
    assert main(["run", str(path)]) == 0
    (spec,) = lookup.load(path).expand("tiny")
    run = RunDir(tmp_path / "results", spec.manifest, spec.run_id)
    shutil.rmtree(run.checkpoints)
    capsys.readouterr()
    return path, run


def test_a_run_from_uncommitted_code_is_retrained_apart_and_sample_names_the_copy(trained, capsys):
    """Issue 49.1: the stored run was trained from uncommitted code and its bits are not this code's. `repro
    sample` says so before anything trains; the command it names succeeds, keeping the retrained copy
    apart; `repro sample` then names that copy, which samples."""
    path, run = trained
    stored = run.summary()
    _edit(run, code_version="0123abc+dirty", valid_bits=stored["valid_bits"] + 1e-3)
    assert main(["sample", run.run_id]) == 2
    err = capsys.readouterr().err
    copy = run.path.parent.parent.parent / ".retrain" / run.run_id / "runs" / run.path.parent.name / run.run_id
    assert (
        "not expected to give the stored bits (it was trained from uncommitted code, code_version 0123abc+dirty," in err
    )
    assert f"`repro sample {copy}`" in err and err.count("\n") == 1
    command = err.split("`repro run ", 1)[1].split("`", 1)[0].split()
    assert command[1:] == ["--scale", "tiny", "--run-id", run.run_id, "--retrain-checkpoint"]

    assert main(["run", str(path), *command[1:]]) == 0  # the manifest by its path here
    out = capsys.readouterr().out
    assert "not the stored bits" in out and "as foreseen: it was trained from uncommitted code" in out
    assert f"`repro sample {copy}` samples it" in out and "  kept apart: valid " in out
    assert run.last_checkpoint is None and (copy / "checkpoints" / "last.ckpt").exists()

    assert main(["sample", run.run_id]) == 2
    err = capsys.readouterr().err
    assert "its retrained copy has one: valid_bits" in err and f"`repro sample {copy}` samples it" in err
    assert main(["sample", str(copy), "--length", "20"]) == 0
    assert "--- sample 1 of 4 (20 symbols) ---" in capsys.readouterr().out

    assert main(["run", str(path), *command[1:]]) == 0  # again: the copy is not trained again
    out = capsys.readouterr().out
    assert "was retrained before" in out and "step " not in out and "kept apart" in out


def test_a_mismatch_nothing_foresaw_fails_and_still_names_the_copy_and_verify(trained, capsys):
    path, run = trained
    _edit(run, code_version="0123abc", test_bits=run.summary()["test_bits"] - 1e-3)
    assert main(["sample", run.run_id]) == 2
    assert "checks that it reproduces the stored bits and keeps its checkpoint" in capsys.readouterr().err
    assert main(["run", str(path), "--run-id", run.run_id, "--retrain-checkpoint"]) == 1
    err = capsys.readouterr().err
    assert "not the stored bits" in err and "it was trained at code 0123abc, this is " in err
    assert f"`repro verify {run.run_id}`" in err and "`repro sample " in err and err.count("\n") == 1
    assert run.last_checkpoint is None


def test_a_run_trained_into_another_root_says_whether_it_gave_the_shipped_runs_bits(
    trained, tmp_path, monkeypatch, capsys
):
    """Issue 49.1: the Quick start trains the shipped smoke run's id into a fresh root; its bits differed
    from the shipped run's in the 4th decimal with no word."""
    path, run = trained
    shipped = tmp_path / "shipped"
    shutil.copytree(run.path, shipped / "runs" / run.path.parent.name / run.run_id)
    monkeypatch.setenv("REPRO_RESULTS", str(shipped))  # the default root: the shipped runs
    assert main(["--results", str(tmp_path / "fresh"), "run", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"the same bits as the run of this id stored under {shipped / 'runs'}" in out

    twin = RunDir(shipped, run.path.parent.name, run.run_id)
    _edit(twin, code_version="0123abc+dirty", valid_bits=run.summary()["valid_bits"] + 1e-4)
    assert main(["--results", str(tmp_path / "fresh2"), "run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "not the bits of the run of this id stored under" in out and "trained from uncommitted code" in out
    _edit(twin, code_version="0123abc")  # committed code elsewhere: nothing foreseen, this run's commit named
    assert main(["--results", str(tmp_path / "fresh3"), "run", str(path)]) == 0
    out = capsys.readouterr().out
    here = RunDir(tmp_path / "fresh3", run.path.parent.name, run.run_id).spec()["code_version"]
    assert f"it was trained at code 0123abc, this is {here}" in out and f"`repro verify {run.run_id}`" in out
    assert main(["run", str(path)]) == 0  # into the default root itself: the run is skipped, no comparison
    assert "stored under" not in capsys.readouterr().out


def test_a_users_ablation_reports_its_claims_metrics_and_labels_the_notes_it_inherited(tmp_path, corpus):
    """Issue 49.3: a user's manifest that includes a recipe printed the recipe's notes as its own, and a
    metric its claim compared (here attn_keys_per_query, which no renderer it names reads) appeared in no
    table."""
    from spine_manifests import stored_run, tiny_manifest

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("notes: >\n  The recipe's choice, written for its own manifests.\n")
    own = tiny_manifest(corpus, name="my-ablation", grid="grid:\n  model.stride: [8, 16]\n")
    own += "claims:\n  - id: fewer-keys\n    text: fewer keys\n    check: 'attn_keys_per_query[stride=8] < attn_keys_per_query[stride=16]'\n"
    path = tmp_path / "mine.yaml"
    path.write_text(f"include: recipe.yaml\n{own}notes: >\n  My own note.\n")
    root = tmp_path / "results"
    for spec, keys in zip(lookup.load(path).expand("tiny"), (11.5, 19.25)):
        stored_run(root, spec, valid_bits=3.0, test_bits=3.1, attn_keys_per_query=keys)
    assert main(["report", str(path)]) == 0
    text = (root / "reports" / "my-ablation.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| stride |"))
    assert "attn_keys_per_query" in header
    assert "| 11.5 |" in text and "| 19.25 |" in text
    notes = text.split("## Notes", 1)[1]
    assert notes.startswith("\n\nMy own note.\n") and "The recipe's choice" not in notes.split("## Notes of", 1)[0]
    assert "## Notes of the included `recipe.yaml`" in notes and "> The recipe's choice, written for its own" in notes


def test_a_capped_run_scores_a_prefix_keeps_its_id_and_full_eval_scores_all(tmp_path, write_manifest, capsys):
    """Issue 49.4: `--max-steps 10` runs spent most of their ~70 s scoring every target of both splits.
    A capped run scores each split's first train.val_tokens targets (and says so) under the id it had;
    --full-eval scores every target, as the uncapped run does."""
    from repro.config.capped import with_max_steps

    path = write_manifest(extra_train=", val_tokens: 256")
    (spec,) = lookup.load(path).expand("tiny")
    capped_id = with_max_steps(spec, 10).run_id
    assert main(["run", str(path), "--max-steps", "10"]) == 0
    out = capsys.readouterr().out
    assert "they score each split's first 256 targets (train.val_tokens" in out
    assert "(each split's first 256 targets)" in out
    summary = RunDir(tmp_path / "results", spec.manifest, capped_id).summary()
    assert summary["eval_targets_cap"] == 256 and 256 <= summary["valid_targets"] < 1000

    assert main(["--results", str(tmp_path / "full"), "run", str(path), "--max-steps", "10", "--full-eval"]) == 0
    full = RunDir(tmp_path / "full", spec.manifest, capped_id).summary()  # the same id
    assert "eval_targets_cap" not in full and full["valid_targets"] > 2000
    assert main(["--results", str(tmp_path / "full"), "run", str(path)]) == 0  # uncapped: every target
    assert RunDir(tmp_path / "full", spec.manifest, spec.run_id).summary()["valid_targets"] == full["valid_targets"]
    capsys.readouterr()
    assert main(["run", str(path), "--full-eval"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_eta_counts_a_capped_runs_evaluation_at_its_prefix(tmp_path, write_manifest):
    from spine_manifests import stored_run

    from repro.config.capped import with_max_steps
    from repro.plan import eta

    (spec,) = lookup.load(write_manifest(extra_train=", val_tokens: 64")).expand("tiny")
    # a stored run of the shape: 0.5 s a step, 20 s to score 1,280 targets (a capped one scored 128 in 2 s)
    stored_run(tmp_path / "r", spec, seconds_per_step=0.5, eval_seconds=20.0, valid_targets=640, test_targets=640)
    short = with_max_steps(spec, 10)
    stored_run(tmp_path / "r", short, seconds_per_step=0.5, eval_seconds=2.0, valid_targets=64, test_targets=64)
    timings = eta.Timings([tmp_path / "r"])
    assert eta.plan([spec], timings).startswith("ETA 35s for 1 run(s)")  # 30 x 0.5 + 20: the whole splits
    assert eta.plan([short], timings, {short.run_id}).startswith("ETA 7s for 1 run(s)")  # 10 x 0.5 + 2 x 64 x 20 / 1280
    assert eta.plan([short], timings).startswith("ETA 25s for 1 run(s)")  # --full-eval: 10 x 0.5 + 20
    assert eta.plan([spec, spec], timings, parallel=2).startswith("ETA 35s (2 at a time) for 2 run(s)")


def test_list_counts_every_trained_scale_not_only_tiny(capsys):
    """Issue 49.5: the cpu-only pilots read "0 0" (tiny) in `repro list`."""
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[2] / "results"
    assert main(["list", "--results", str(shipped)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split("  ")
    header = [h.strip() for h in header if h.strip()]
    assert header[2:4] == ["tiny (finished/runs)", "cpu (finished/runs)"]
    pilot = next(line for line in lines if line.startswith("cpu-pilot-fixed "))
    cells = pilot.split()[-len(header) + 2 :]  # one column per scale, in the header's order
    assert cells[:2] == ["-", "2/2"]  # no tiny scale; both cpu runs finished
    assert main(["list", "--results", str(shipped), "--scale", "cpu"]) == 0
    pilot = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("cpu-pilot-fixed "))
    assert pilot.split()[-2:] == ["2", "2"]


def test_show_names_what_tells_the_variants_apart_and_which_runs_are_finished(tmp_path, capsys):
    """Issue 49.5: `repro show as-table1` listed variant, seed and steps, not the layers or S that make the
    variants, nor which runs were finished."""
    from spine_manifests import stored_run

    from repro.config import manifest as manifests

    specs = manifests.load(manifests.discover()["as-table1"]).expand("tiny")
    stored_run(tmp_path / "results", specs[0], valid_bits=2.0)
    assert main(["show", "as-table1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(f"[scale tiny; 1 of 12 finished under {tmp_path / 'results'}/]")
    header = lines[1].split()
    for column in ("variant", "layers", "d_model", "kind", "limit", "seed", "state"):
        assert column in header, column
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    large = next(r for r in rows.values() if r[1] == "adaptive-large")
    assert large[header.index("layers")] == "6" and large[header.index("limit")] == "8192"
    assert rows[specs[0].run_id][-1] == "finished" and rows[specs[1].run_id][-2:] == ["to", "run"]


def test_an_unknown_metric_is_refused_in_plain_english(tmp_path, corpus, capsys):
    """Issue 49.5: "is not stored by a adaptive_span run"."""
    from spine_manifests import tiny_manifest

    text = tiny_manifest(corpus).replace(
        "family: sparse_transformer, pattern: dense, layers: 1, d_model: 32, heads: 2, stride: 16",
        "family: adaptive_span, layers: 1, d_model: 32, d_ff: 64, heads: 2",
    )
    text += "claims:\n  - {id: c, text: t, check: 'span_mean[] > 1'}\n"
    path = tmp_path / "m.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is not stored by an adaptive_span run" in err and "a adaptive_span" not in err


def test_a_large_valid_test_gap_is_said(tmp_path, write_manifest, capsys):
    """Issue 49.5: linux-doc at cpu reads 3.25 valid against 2.74 test bits, and nothing said so."""
    from spine_manifests import stored_run

    from repro.config.metrics import split_gap

    assert split_gap(2.518, 2.530) is None and split_gap(None, 2.5) is None  # wiki-lead8: 0.5% apart
    assert split_gap(3.25, 2.74).startswith("valid 3.25 and test 2.74 bits differ by 0.51 (19% of the smaller)")
    path = write_manifest()
    (spec,) = lookup.load(path).expand("tiny")
    stored_run(tmp_path / "results", spec, valid_bits=3.25, test_bits=2.74)
    assert main(["report", str(path)]) == 0
    text = (tmp_path / "results" / "reports" / "t-tiny.md").read_text()
    assert "**Valid against test** (1 of 1 cells), the widest gap: valid 3.25 and test 2.74 bits differ" in text


def test_an_untimed_evaluation_is_estimated_from_runs_of_its_own_procedure(tmp_path, write_manifest):
    """Windows read each target's context again (about 0.8 of a training step's time per step's worth of
    targets, stored runs) where streams take about 0.35: an untimed window evaluation is estimated from
    the window runs, not from the median of all."""
    from spine_manifests import stored_run

    from repro.plan import eta

    path = write_manifest(grid="grid:\n  model.d_model: [32, 48, 64]\n")
    windows, streams, untimed = lookup.load(path).expand("tiny")
    # 1,280 targets = 10 steps of 4 x 32 tokens at 1 s a step: ratio 0.8 (windows), 0.3 (streams)
    done = {"seconds_per_step": 1.0, "valid_targets": 640, "test_targets": 640}
    stored_run(tmp_path / "r", windows, eval_seconds=8.0, eval_procedure="windows", **done)
    stored_run(tmp_path / "r", streams, eval_seconds=3.0, eval_procedure="stream", **done)
    stored_run(tmp_path / "r", untimed, eval_procedure="windows", **done)
    timing = eta.Timings([tmp_path / "r"]).of(untimed.resolved())
    assert timing.estimated and timing.per_target * timing.targets == pytest.approx(8.0)
