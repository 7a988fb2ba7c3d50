"""Bad input: one line on stderr, exit status 2, no traceback, nothing written."""

from pathlib import Path

import pytest
from spine_manifests import tiny_manifest

from repro.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_clean_error(code, err, pattern, results: Path):
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert pattern in lines[0]
    assert not results.exists()


def test_unknown_manifest_suggests_the_closest(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", "smok")
    assert_clean_error(code, err, "did you mean 'smoke'", tmp_path / "results")


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda t: t.replace("title:", "title: [unclosed\nx:"), "m.yaml:"),
        (lambda t: t + "colour: blue\n", "colour: unknown key; allowed keys"),
        (lambda t: t.replace("steps: 30", "steps: lots"), "train.steps: expected an integer, got str 'lots'"),
        (lambda t: t.replace("heads: 2", "heads: 2, hedas: 3"), "model.hedas: unknown key"),
        (lambda t: t + "grid:\n  model.dropout: [0.1, 0.2]\n", "grid.model.dropout: grid key is not set in base"),
        (lambda t: t.replace("renders: [curves]", "renders: [curvez]"), "renders: unknown renderer 'curvez'"),
        (lambda t: t + "claims:\n  - {id: x, text: y, check: 'valid_bits[ < 2'}\n", "claims[0]"),
        (
            lambda t: t
            + "grid:\n  model.stride: [8, 16]\nclaims:\n  - {id: x, text: y, check: 'valid_bits[strid=16] < 2'}\n",
            "filter strid=16 names no single grid key; grid keys: model.stride",
        ),
        (
            lambda t: t
            + "grid:\n  model.stride: [8, 16]\nclaims:\n  - {id: x, text: y, check: 'valid_bits[stride=12] < 2'}\n",
            "stride=12 is not in the grid; model.stride takes: 8, 16",
        ),
        (
            lambda t: t + "grid:\n  model.stride: [8, 16]\nclaims:\n  - {id: x, text: y, check: 'valid_bits[] < 2',"
            " requires: ['valid_bits[strides=8] > 1']}\n",
            "filter strides=8 names no single grid key",
        ),
        (lambda t: t + "requires: ['valid_bits[] <']\nclaims: []\n", "requires[0]"),
        (lambda t: t + "seeds: 0\n", "seeds: expected a positive number of seeds per grid cell, got int 0"),
        (lambda t: t.replace("tiny: {}", "tiny: {seeds: two}"), "scales.tiny.seeds: expected a positive number"),
        (
            lambda t: t + "reference:\n  tabel1: []\n",
            "reference.tabel1: unknown key; the renderers ['curves'] read: runs",
        ),
        (
            lambda t: t + "reference:\n  runs: [{match: {colour: red}, label: x}]\n",
            "reference.runs[0].match.colour: names no grid key",
        ),
        (
            lambda t: t + "reference:\n  runs: [{match: {}, label: x, test_bits: 'one'}]\n",
            "reference.runs[0].test_bits: expected a number (the paper's value) or null, got str 'one'",
        ),
    ],
)
def test_manifest_errors(capsys, tmp_path, write_manifest, mutate, expected):
    path = write_manifest(mutate(tiny_manifest(tmp_path / "corpus.txt")))
    code, _, err = run_cli(capsys, "run", str(path))
    assert_clean_error(code, err, expected, tmp_path / "results")


@pytest.mark.parametrize(
    "grid, expected",
    [
        ("model.strid: [8, 16]", "grid.model.strid: unknown key; did you mean model.stride?"),
        ("modle.stride: [8, 16]", "grid.modle.stride: unknown key; did you mean model.stride?"),  # the section
        ("train.stpes: [10, 20]", "grid.train.stpes: unknown key; did you mean train.steps?"),
        ("model.zzz: [1, 2]", "grid.model.zzz: unknown key; keys set in base: model.d_model, model.family,"),
        ("xyz.qq: [8, 16]", "grid.xyz.qq: unknown key; a grid key starts with its section: data, eval,"),
    ],
)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_unknown_grid_key_names_the_closest_known_one(capsys, tmp_path, write_manifest, grid, expected, command):
    """A misspelt grid key (or section) is one line with the closest key base sets, exit status 2, for
    `repro validate FILE` and `repro run FILE` alike; a scale's own grid is checked the same way."""
    path = write_manifest(tiny_manifest(tmp_path / "corpus.txt", grid=f"grid:\n  {grid}\n"))
    code, _, err = run_cli(capsys, command, str(path))
    assert_clean_error(code, err, f"{path}: {expected}", tmp_path / "results")
    scale_grid = path.read_text().replace("grid:\n", "").replace(f"  {grid}\n", "")
    path.write_text(scale_grid.replace("tiny: {}", f"tiny: {{grid: {{{grid}}}}}"))
    code, _, err = run_cli(capsys, command, str(path))
    assert_clean_error(code, err, f"{path}: scales.tiny.{expected}", tmp_path / "results")


def test_yaml_error_names_the_line(capsys, tmp_path, write_manifest):
    path = write_manifest("name: x\ntitle: y\npaper: [\n")
    code, _, err = run_cli(capsys, "validate", str(path))
    assert code == 2 and f"{path}:" in err and "YAML syntax error" in err


def test_unknown_scale(capsys, tmp_path, write_manifest):
    code, _, err = run_cli(capsys, "run", str(write_manifest()), "--scale", "huge")
    assert_clean_error(
        code, err, "has no scale 'huge'; pass --scale tiny (its scales: tiny, paper)", tmp_path / "results"
    )


def test_a_manifest_without_the_default_scale_says_which_to_pass(capsys, tmp_path, write_manifest):
    path = write_manifest(write_manifest().read_text().replace("scales:\n  tiny: {}\n", ""))
    code, _, err = run_cli(capsys, "run", str(path))
    assert_clean_error(
        code, err, "has no scale 'tiny' (the default); pass --scale paper (its scales: paper)", tmp_path / "results"
    )


def test_a_group_name_selects_every_matching_manifest(capsys, tmp_path, monkeypatch, write_manifest):
    exp = tmp_path / "exp"
    (exp / "a").mkdir(parents=True)
    (exp / "b").mkdir()
    for paper in ("a", "b"):
        (exp / paper / "t1.yaml").write_text(
            write_manifest(name=f"{paper}.yaml").read_text().replace("name: t-tiny", f"name: {paper}s-table1")
        )
    monkeypatch.setenv("REPRO_EXPERIMENTS", str(exp))
    monkeypatch.setenv("REPRO_ALLOW_READ", str(tmp_path))  # the corpus lies above the manifests' folders
    code, out, _ = run_cli(capsys, "show", "table1")
    assert code == 0 and out.startswith("table1: 2 manifests: as-table1, bs-table1")
    assert "as-table1: A tiny test manifest" in out and "bs-table1: A tiny test manifest" in out
    code, out, _ = run_cli(capsys, "run", "table1", "--dry-run")
    assert code == 0 and [line.split()[1] for line in out.splitlines()[1:-1]] == ["as-table1", "bs-table1"]
    code, out, _ = run_cli(capsys, "show", "as-table1")  # an exact name selects one
    assert code == 0 and "bs-table1" not in out


def test_missing_dataset_names_the_prepare_command(capsys, tmp_path, write_manifest):
    path = write_manifest(
        write_manifest()
        .read_text()
        .replace(
            '{name: file, path: "' + str(tmp_path / "corpus.txt") + '", kind: text8, block: 32}',
            "{name: text8, block: 32}",
        )
    )
    code, _, err = run_cli(capsys, "run", str(path))
    assert code == 2 and "repro data prepare text8" in err


def test_validate_accepts_every_shipped_manifest(capsys):
    code, out, _ = run_cli(capsys, "validate")
    assert code == 0 and "ok  smoke" in out


def test_seeds_must_be_positive(capsys, tmp_path, write_manifest):
    code, _, err = run_cli(capsys, "run", str(write_manifest()), "--seeds", "0")
    assert_clean_error(code, err, "--seeds 0: allowed: a positive number of seeds per grid cell", tmp_path / "results")


@pytest.mark.parametrize(
    "argv, line",
    [
        (["--devices", "two"], "error: --devices two: expected an integer"),
        (["--nodes", "0"], "error: --num-nodes 0: allowed: a positive number of nodes"),
        (["--max-steps", "0"], "error: --max-steps 0: allowed: a positive number of steps"),
        (["--launcher", "slurm", "--cpus-per-task", "-2"], "error: --cpus-per-task -2: allowed: a positive number"),
    ],
)
def test_option_values_are_refused_as_they_are_parsed(capsys, tmp_path, write_manifest, argv, line):
    code, _, err = run_cli(capsys, "--results", str(tmp_path / "results"), "run", str(write_manifest()), *argv)
    assert_clean_error(code, err, line, tmp_path / "results")
    assert err.strip() == line


def test_a_claim_on_another_split_than_the_manifests_is_refused_in_one_line(capsys, tmp_path, write_manifest):
    """One split per manifest (issue 60): judging one claim on test and its sibling on valid is a forking
    path. A claim naming the other split is refused (exit 2); a sanity check (``learned``) may read valid."""
    grid = "grid:\n  model.pattern: [dense, strided]\n"
    claims = (
        "claims:\n"
        '  - {id: a, check: "test_bits[pattern=strided] < test_bits[pattern=dense]", requires: ["learned[]"]}\n'
        '  - {id: b, check: "valid_bits[pattern=strided] < valid_bits[pattern=dense]"}\n'
    )
    path = write_manifest(tiny_manifest(tmp_path / "corpus.txt", grid=grid, claims=claims))
    code, _, err = run_cli(capsys, "validate", str(path))
    expected = f"{path}: claims[1]: names valid_bits[pattern=strided], but the manifest judges its claims on the test"
    assert_clean_error(code, err, expected, tmp_path / "results")
    path.write_text(path.read_text().replace("claims:\n", "split: valid\nclaims:\n"))
    code, _, err = run_cli(capsys, "validate", str(path))
    assert_clean_error(code, err, f"{path}: claims[0]: names test_bits[pattern=strided], but", tmp_path / "results")
    path.write_text(path.read_text().replace("split: valid", "split: dev"))
    code, _, err = run_cli(capsys, "validate", str(path))
    assert_clean_error(code, err, f"{path}: split: expected one of test, valid", tmp_path / "results")
