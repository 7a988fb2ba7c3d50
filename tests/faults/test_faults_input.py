"""Hostile input: every bad value is one line naming file, key, value and what is allowed, exit 2,
at `validate` when no data is needed, else at `run` before anything is written."""

from __future__ import annotations

import pytest

from repro.cli import main


def error_line(capsys, argv, results):
    code = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert not results.exists()
    return lines[0]


@pytest.mark.parametrize(
    "change, expected",
    [
        (("layers: 1,", "layers: 0,"), "model.layers: got 0; allowed: >= 1"),
        (("layers: 1,", "layers: -3,"), "model.layers: got -3; allowed: >= 1"),
        (("heads: 2,", "heads: 3,"), "model.d_model: got 32: a width of 32 does not split into model.heads = 3"),
        (("checkpoint_every: 5", "checkpoint_every: 0"), "train.checkpoint_every: got 0; allowed: >= 1"),
        (("log_every: 2", "log_every: 0"), "train.log_every: got 0; allowed: >= 1"),
        (("batch_size: 4", "batch_size: 0"), "train.batch_size: got 0; allowed: >= 1"),
        (("steps: 20", "steps: -5"), "train.steps: got -5; allowed: >= 1"),
        (("steps: 20", "steps: -1"), "train.steps: got -1; allowed: >= 1"),
        (("lr: 3.0e-3", "lr: -1"), "train.lr: got -1.0; allowed: > 0 and <= 10"),
        (("lr: 3.0e-3", "lr: .nan"), "train.lr: got nan; allowed: a finite number"),
        (("lr: 3.0e-3", "lr: 1e39"), "train.lr: got 1e+39; allowed: > 0 and <= 10"),
        (("dropout: 0.1", "dropout: 1.5"), "model.dropout: got 1.5; allowed: >= 0 and < 1"),
        (("min_context: 16", "min_context: 32"), "eval.min_context: got 32; allowed: < data.block = 32"),
        (("kind: text8", "kind: words"), "data.kind: got 'words'; allowed: one of bytes, chars, text8"),
        (("name: file,", "name: nosuch,"), "data.name: got 'nosuch'; allowed: one of"),
        (("name: f-run", "name: /abs/dir"), "name: '/abs/dir' is not a plain name"),
        (("name: f-run", "name: ../../x"), "name: '../../x' is not a plain name"),
        (
            ("paper: suite", "paper: suite\nclaims: [{id: a, text: t, check: 'test_bits[] / 0 < 1'}]"),
            "division by zero",
        ),
        (
            ("paper: suite", "paper: suite\nclaims: [{id: a, text: t, check: \"'a' * 100000000000\"}]"),
            "constant 'a' is not a number",
        ),
    ],
)
def test_a_bad_value_is_one_line_at_validate(capsys, tmp_path, write_manifest, change, expected):
    path = write_manifest()
    path.write_text(path.read_text().replace(*change, 1))
    line = error_line(capsys, ["validate", str(path)], tmp_path / "results")
    assert line.startswith(f"error: {path}: ") and expected in line, line


def test_unreadable_manifests_are_one_line(capsys, tmp_path, write_manifest):
    bad = write_manifest()
    bad.write_bytes(bad.read_bytes().replace(b"fault matrix", b"fault \xff matrix"))
    assert "not UTF-8 text (byte 0xff" in error_line(capsys, ["validate", str(bad)], tmp_path / "results")
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)
    ]
    bomb = write_manifest("\n".join(levels) + "\n", file="bomb.yaml")  # 9^9 nodes once expanded
    assert "aliases expand to more than" in error_line(capsys, ["validate", str(bomb)], tmp_path / "results")
    loop = write_manifest("name: &n [1, *n]\n", file="loop.yaml")
    assert "a recursive alias" in error_line(capsys, ["validate", str(loop)], tmp_path / "results")
    nul = write_manifest("name: a\ntitle: a\x00b\n", file="nul.yaml")
    line = error_line(capsys, ["validate", str(nul)], tmp_path / "results")
    assert line == f"error: {nul}:2: YAML syntax error: character #x0000 at column 9: control characters are not " + (
        "allowed in YAML text"
    )


def test_what_needs_the_data_or_the_flags_is_one_line_at_run(capsys, tmp_path, write_manifest):
    path = write_manifest()
    line = error_line(capsys, ["run", str(path), "--max-steps", "-1"], tmp_path / "results")
    assert "--max-steps -1: allowed: a positive number of steps" in line
    line = error_line(capsys, ["run", str(path), "--devices", "0"], tmp_path / "results")
    assert "--devices 0: allowed: a positive number of devices" in line
    text = path.read_text()
    for block, split in (
        (300000, "the train split of file (4 training streams of"),  # the train split fits 5000,
        (5000, "split of file (its 2,520 targets); allowed: at most 2,520"),
    ):  # valid/test do not
        path.write_text(text.replace("block: 32", f"block: {block}"))
        assert main(["validate", str(path)]) == 0
        line = error_line(capsys, ["run", str(path)], tmp_path / "results")
        assert f"{path}: data.block: {block} is longer than " in line and split in line and "allowed: at most" in line


@pytest.mark.parametrize(
    "change, expected",
    [
        (("steps: 20", "steps: 1:20:00"), "7: base.train.steps: 1:20:00 is 4800 in YAML 1.1 (base 60) and text"),
        (("steps: 20", "steps: 020"), "7: base.train.steps: 020 is 16 in YAML 1.1 (octal) and 20 in YAML 1.2"),
        (("steps: 20", "steps: 0o24"), "7: base.train.steps: 0o24 is text in YAML 1.1 and 20 in YAML 1.2 (octal)"),
        (("steps: 20", "steps: 0b10100"), "7: base.train.steps: 0b10100 is 20 in YAML 1.1 (binary) and text in YAML"),
        (("steps: 20", "steps: 1_000"), "7: base.train.steps: 1_000 is a number in YAML 1.1 (which skips its _) and"),
        (("steps: 20", "steps: 2_0"), "7: base.train.steps: 2_0 is a number in YAML 1.1 (which skips its _) and text"),
        (("lr: 3.0e-3", "lr: 3_0.0e-5"), "7: base.train.lr: 3_0.0e-5 is a number in YAML 1.1 (which skips its _)"),
        (("steps: 20", "steps: 0x_"), "7: base.train.steps: 0x_ is a number in YAML 1.1"),  # PyYAML fails to build it
        (("dropout: 0.1", "dropout: 0.1, flag: off"), "6: base.model.flag: off is a boolean in YAML 1.1 and text"),
        (("paper: suite", "paper: suite\nscales_note: yes"), "4: scales_note: yes is a boolean in YAML 1.1"),
        (("paper: suite", "paper: suite\nname: dup2"), "4: name: set twice in one mapping (lines 1 and 4)"),
        (("lr: 3.0e-3,", "lr: 3.0e-3, lr: 9.0,"), "7: base.train.lr: set twice in one mapping (lines 7 and 7)"),
    ],
)
def test_yaml_with_two_meanings_is_one_line_naming_the_key(capsys, tmp_path, write_manifest, change, expected):
    path = write_manifest()
    path.write_text(path.read_text().replace(*change, 1))
    line = error_line(capsys, ["validate", str(path)], tmp_path / "results")
    assert line.startswith(f"error: {path}:{expected}"), line


def test_a_batch_larger_than_the_split_names_the_batch_size(capsys, tmp_path, write_manifest):
    path = write_manifest()
    line = error_line(capsys, ["run", str(path), "train.batch_size=100000000"], tmp_path / "results")
    assert f"{path}: train.batch_size: 100000000 streams of data.block = 32 tokens do not fit the train split" in line
    assert "data.block: 32 is longer" not in line and line.split("allowed: at most ")[1].replace(",", "").isdigit()
