"""Command-line overrides and sweeps, --save, and `include:` in manifests."""

from __future__ import annotations

import json
import textwrap

import pytest

from repro.cli import main
from repro.config import manifest as manifests
from repro.config.access import Access


def one_line_error(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0]
    return err[0]


def test_an_override_sets_the_key_in_every_run(capsys):
    assert main(["show", "as-fig3", "--scale", "tiny", "model.span.ramp=64", "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)
    assert shown["manifest"] == "as-fig3.model.span.ramp_64" and len(shown["runs"]) == 8 * 3  # 3 seeds per cell
    assert {r["model"]["span"]["ramp"] for r in shown["runs"]} == {64}
    assert main(["show", "as-fig4", "--scale", "tiny", "model.span.ramp=64"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:2] == ["run_id", "model.span.ramp"] and out[2].split()[1] == "64"


def test_a_sweep_adds_or_replaces_an_axis_at_every_scale(capsys):
    for scale in ("tiny", "paper"):
        assert main(["show", "as-ablate-ramp", "--scale", scale, "-m", "model.span.ramp=16,48", "--json"]) == 0
        (shown,) = json.loads(capsys.readouterr().out)
        seeds = 3 if scale == "tiny" else 1  # the tiny recipe's replicates
        assert [r["cell"] for r in shown["runs"]] == [{"model.span.ramp": 16}, {"model.span.ramp": 48}] * seeds
    assert main(["show", "as-fig4", "-m", "train.lr=0.01,0.02", "--json"]) == 0  # a new axis
    (shown,) = json.loads(capsys.readouterr().out)
    assert [r["train"]["lr"] for r in shown["runs"]] == [0.01, 0.02] * 3


@pytest.mark.parametrize(
    "args, expected",
    [
        (["model.span.rampp=3"], "model.span.rampp: unknown key; allowed keys:"),
        (["model.span.ramp=wide"], "model.span.ramp: expected an integer, got str 'wide'"),
        (["model.span.ramp=16,48"], "a comma-separated list is a sweep: pass -m"),
        (["span=3"], "set.span: expected a dotted key of data, model, train or eval"),
        (["-m", "variant=a,b"], "sweep.variant: expected a dotted key"),
        (["model..x=1"], "expected KEY=VALUE with a dotted key"),
    ],
)
def test_a_bad_override_is_one_line(capsys, args, expected):
    assert expected in one_line_error(capsys, "show", "as-fig4", *args)


def test_ablation_from_the_command_line_saved_as_a_manifest(capsys, tmp_path, write_manifest):
    """Train a sweep, report it, save it, validate the saved file: the same name, ids and runs."""
    path = write_manifest(grid="grid:\n  model.stride: [16]\n")
    saved = tmp_path / "ablations" / "lr.yaml"
    sweep = ["-m", "train.lr=0.003,0.001"]
    assert main(["run", str(path), *sweep, "--save", str(saved)]) == 0
    out = capsys.readouterr().out
    assert out.count("finished:") == 2 and "step 30/30  train bits" in out and "s/step  ETA" in out
    assert "[1/2] elapsed 0s, ETA unknown: no stored run of the same shape as these 2" in out
    assert "[2/2] elapsed" in out and "for 1 run(s), from stored runs of the same shape under" in out
    name = "t-tiny.train.lr_0.003_0.001"
    runs = tmp_path / "results" / "runs"
    assert sorted(p.name for p in runs.iterdir()) == [name]  # apart from the base manifest's runs
    assert main(["report", str(path), *sweep]) == 0
    report = capsys.readouterr().out
    assert f"Manifest `{name}`" in report and "| 0.003 |" in report and "| 0.001 |" in report
    assert main(["validate", str(saved)]) == 0
    assert f"ok  {name}" in capsys.readouterr().out
    assert main(["run", str(saved), "--dry-run"]) == 0
    assert capsys.readouterr().out.count("[finished]") == 2
    assert main(["status", name, "--json"]) == 0  # the store knows the name now
    assert [r["status"] for r in json.loads(capsys.readouterr().out)] == ["finished", "finished"]
    assert main(["report", str(path)]) == 0  # the base manifest's report has none of them
    assert f"No stored runs yet: `repro run {path} --scale tiny`" in capsys.readouterr().out


def test_a_manifest_outside_experiments_is_found_by_name_once_run(capsys, tmp_path, write_manifest):
    path = write_manifest()  # in a tmp folder, not under experiments/
    assert "unknown manifest 't-tiny'" in one_line_error(capsys, "status", "t-tiny")
    assert main(["report", str(path)]) == 0  # its hint names it by path: a command that works
    assert f"`repro run {path} --scale tiny`" in capsys.readouterr().out
    assert main(["run", str(path), "--max-steps", "3"]) == 0
    capsys.readouterr()
    assert main(["run", "t-tiny", "--max-steps", "3", "--dry-run"]) == 0
    assert "[finished]" in capsys.readouterr().out
    assert main(["status", "t-tiny"]) == 0 and "finished" in capsys.readouterr().out


def _write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_include_merges_files_and_accumulates_notes(tmp_path, corpus):
    _write(
        tmp_path / "shared" / "recipe.yaml",
        f"""\
        paper: suite
        base:
          data: {{name: file, path: ../{corpus.name}, kind: text8, block: 32}}
          model: {{family: sparse_transformer, pattern: dense, layers: 1, d_model: 32, heads: 2}}
          train: {{steps: 30, batch_size: 4}}
        scales: {{tiny: {{train: {{steps: 10}}}}}}
        notes: |
          From the recipe.
        """,
    )
    m = manifests.load(
        _write(
            tmp_path / "exp" / "m.yaml",
            """\
        name: m
        title: M
        include: ../shared/recipe.yaml
        base: {model: {layers: 2}}
        set: {train.lr: 0.01}
        sweep: {model.d_model: [32, 64]}
        notes: |
          From the manifest.
        """,
        ),
        Access(read=(tmp_path,)),  # the corpus lies above both files' folders
    )
    (a, b) = m.expand("tiny")
    assert (a.model.layers, a.train.steps, a.train.lr, a.model.d_model, b.model.d_model) == (2, 10, 0.01, 32, 64)
    assert a.data.path == str(corpus)  # relative to the file that wrote it
    assert m.notes == "From the recipe.\nFrom the manifest.\n"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("include: missing.yaml\n", "include: missing.yaml: no such file"),
        ("include: m.yaml\n", "include: m.yaml: includes itself (a cycle)"),
        ("include: [1]\n", "include: expected a path or a list of paths"),
        ("set: {train.lr: 1}\nsweep: {train.lr: [1, 2]}\n", "train.lr: both in set and in sweep"),
    ],
)
def test_include_errors(tmp_path, text, expected):
    path = _write(tmp_path / "m.yaml", "name: m\ntitle: M\npaper: suite\nbase: {}\n" + text)
    with pytest.raises(manifests.ManifestError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        manifests.load(path)


def test_a_fragment_with_an_unknown_key_is_named(tmp_path):
    _write(tmp_path / "frag.yaml", "bsae: {}\n")
    path = _write(tmp_path / "m.yaml", "name: m\ntitle: M\npaper: suite\ninclude: frag.yaml\n")
    with pytest.raises(manifests.ManifestError, match=f"{tmp_path / 'frag.yaml'}: bsae: unknown key"):
        manifests.load(path)
