"""Bounds on hostile input and the one-line errors the README promises (issue 22): each case below
hung, exhausted memory or printed a traceback; each is now one line, exit status 2 (1 for a store that
cannot be written), nothing half-written."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from faultkit import one_error

from repro.bounds import MAX_CELLS, MAX_CORPUS_BYTES, MAX_INCLUDES, MAX_MANIFEST_BYTES
from repro.cli import main
from repro.store.runs import RunDir


def test_includes_that_fan_out_are_bounded(tmp_path, write_manifest, capsys):
    path = write_manifest()
    for level in range(8):  # every file includes the next one ten times: 10^7 reads without a bound
        refs = [f"l{level + 1}.yaml"] * 10 if level < 7 else []
        (tmp_path / f"l{level}.yaml").write_text(f"include: {json.dumps(refs)}\nnotes: x\n")
    path.write_text(path.read_text() + "include: [l0.yaml]\n")
    line = one_error(capsys, ["validate", str(path)])
    assert f"include: more than {MAX_INCLUDES} files read in all" in line


def test_grids_manifests_and_corpora_beyond_their_bounds_are_refused(tmp_path, write_manifest, corpus, capsys):
    path = write_manifest(
        train=", seed: 0",
        grid="grid:\n  train.seed: ["
        + ", ".join(map(str, range(1000)))
        + "]\n  train.lr: ["
        + ", ".join(f"{i + 1}.0e-4" for i in range(1000))
        + "]\n",
    )
    for command in ("validate", "show"):
        line = one_error(capsys, [command, str(path)])
        assert f"grid: 1,000,000 runs at scale tiny; allowed: at most {MAX_CELLS:,}" in line
    big = write_manifest(file="big.yaml")
    with open(big, "ab") as fh:
        fh.write(b"# " + b"x" * MAX_MANIFEST_BYTES + b"\n")
    assert f"allowed: at most {MAX_MANIFEST_BYTES:,}" in one_error(capsys, ["validate", str(big)])
    for device in ("/dev/zero", "/dev/full"):
        assert (
            one_error(capsys, ["validate", device]) == f"error: {device}: not a regular file; allowed: a regular file"
        )
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # opened without blocking, never read
    assert "not a regular file" in one_error(capsys, ["validate", str(fifo)])
    sparse = tmp_path / "sparse.txt"
    with open(sparse, "wb") as fh:
        fh.truncate(30 << 30)  # 30 GB, no block on disk
    path.write_text(write_manifest().read_text().replace(str(corpus), str(sparse)))
    line = one_error(capsys, ["validate", str(path)])
    assert f"{sparse}: 32,212,254,720 bytes; allowed: at most {MAX_CORPUS_BYTES:,} bytes" in line
    assert "allowed: at most" in one_error(capsys, ["data", "prepare", "file", "--from", str(sparse)])
    assert not (tmp_path / "results").exists()


def test_a_manifest_or_include_that_is_no_file_is_one_line(tmp_path, write_manifest, capsys):
    path = write_manifest()
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(tmp_path / "loop2.yaml")
    (tmp_path / "loop2.yaml").symlink_to(loop)
    for command in ("validate", "show", "run"):
        assert (
            one_error(capsys, [command, str(loop)])
            == f"error: {loop}: a loop of symbolic links; allowed: a regular file"
        )
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "folder.yaml").mkdir()
    text = path.read_text()
    for ref, what in (
        ("loop.yaml", "a loop of symbolic links; allowed: a regular file"),
        ("/dev/zero", "not a regular file; allowed: a regular file (/dev/zero)"),
        ("fifo.yaml", f"not a regular file; allowed: a regular file ({tmp_path / 'fifo.yaml'})"),  # never opened
        ("folder.yaml", f"not a regular file; allowed: a regular file ({tmp_path / 'folder.yaml'})"),
        ("absent.yaml", f"no such file ({tmp_path / 'absent.yaml'})"),
    ):
        path.write_text(text + f"include: [{ref}]\n")
        assert one_error(capsys, ["validate", str(path)]) == f"error: {path}: include: {ref}: {what}"
    assert not (tmp_path / "results").exists()


LONG = "a" * 400


@pytest.mark.parametrize(
    "override, expected",
    [
        ("model=3", "override 'model=3': sets the whole model section"),
        ("model=abc", "override 'model=abc': sets the whole model section"),
        ("model=1.5", "sets the whole model section"),
        ("model=[1]", "sets the whole model section"),
        ("train=", "override 'train=': sets the whole train section (its other keys back to their defaults)"),
        ("data=", "sets the whole data section"),
        ("train.steps=1e100", "train.steps: got an integer of 333 bits; allowed: at most 2**53 in size"),
        ("train.steps.x=1", "train.steps.x: train.steps is 20, not a section of keys; allowed: a key of a section"),
        ("model.layers=" + "9" * 400, "model.layers: got an integer of 1329 bits"),
        (f"train.seed={LONG}", "train.seed: expected an integer, got str 'aaaa"),
    ],
)
def test_overrides_that_broke_are_one_line(tmp_path, write_manifest, capsys, override, expected):
    path = write_manifest()
    for command in ("show", "run"):
        line = one_error(capsys, [command, str(path), override])
        assert expected in line and len(line) < 400, line
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("value", ["3", "abc", "1.5", "[1]"])
def test_a_section_that_is_no_mapping_is_one_line(tmp_path, write_manifest, capsys, value):
    path = write_manifest()
    text = path.read_text()
    start = text.index("  model: {")
    path.write_text(text[:start] + f"  model: {value}\n" + text[text.index("\n", start) + 1 :])
    assert "model: expected a mapping of its keys, got" in one_error(capsys, ["validate", str(path)])


def test_a_400_character_value_names_its_runs_within_bounds(tmp_path, write_manifest, corpus, capsys):
    path = write_manifest()
    long = "data.path=" + "./" * 195 + corpus.name  # the same file, by a 400-character path
    assert main(["run", str(path), long, "--max-steps", "1"]) == 0
    (stored,) = (tmp_path / "results" / "runs").iterdir()
    assert stored.name.startswith("f-run.data.path_") and len(stored.name) <= 200
    assert RunDir(tmp_path / "results", stored.name, next(stored.iterdir()).name).finished


def test_save_refuses_folders_and_devices(tmp_path, write_manifest, capsys):
    path = write_manifest()
    for target in (str(tmp_path), "/dev/full"):
        line = one_error(capsys, ["show", str(path), "train.steps=5", "--save", target])
        assert line == f"error: --save {target}: not a regular file; allowed: a new file or a manifest saved before"


def test_sample_options_out_of_range_are_one_line(capsys):
    for option, value, allowed in (
        ("--n", "0", "1 to 1024 samples"),
        ("--n", "-1", "1 to 1024 samples"),
        ("--length", "-5", "1 to 1,000,000 symbols"),
        ("--length", "1000000000", "1 to 1,000,000 symbols"),  # weeks at a CPU's ~140 symbols/s
        ("--temperature", "nan", "a finite number > 0"),
        ("--temperature", "0.0", "a finite number > 0"),
        ("--seed", "1180591620717411303424", "0 to 2**64 - 1"),  # 2**70: torch's generator refused it
        ("--seed", "-1", "0 to 2**64 - 1"),
    ):
        assert one_error(capsys, ["sample", "0000", option, value]) == f"error: {option} {value}: allowed: {allowed}"


def test_sample_draws_at_any_positive_temperature_and_bounds_its_symbols(tmp_path, straight, capsys):
    run = stored(tmp_path, straight)
    args = ["sample", str(run.path), "--n", "2", "--length", "24"]
    capsys.readouterr()
    greedy = []
    for temperature in ("1e-300", "5e-324"):  # logits / 1e-300 was inf - inf = NaN: a RuntimeError
        assert main([*args, "--temperature", temperature]) == 0
        greedy.append([line for line in capsys.readouterr().out.splitlines() if not line.startswith("wrote ")])
    assert len(greedy[0]) == 4 and greedy[0] == greedy[1]  # the most likely symbols, both times
    assert main([*args, "--temperature", "1e-3", "--seed", str(2**64 - 1)]) == 0
    line = one_error(capsys, ["sample", str(run.path), "--n", "1024", "--length", "1000000"])
    assert line == "error: --n 1024 x --length 1000000: 1,024,000,000 symbols; allowed: at most 16,777,216 in all"


def stored(tmp_path, straight) -> RunDir:
    """A copy of the straight dense run's store in this test's results root (the session's fixture may also
    hold other models' runs, trained by tests that ran before: they are left out)."""
    summary, _ = straight()
    shutil.copytree(straight.base / "results", tmp_path / "results")
    for other in (tmp_path / "results" / "runs" / "f-run").iterdir():
        if other.name != summary["run_id"]:
            shutil.rmtree(other)
    return RunDir(tmp_path / "results", "f-run", summary["run_id"])


def test_summaries_and_metrics_that_broke_the_store_are_one_line(tmp_path, straight, corpus, capsys):
    run = stored(tmp_path, straight)
    capsys.readouterr()  # the training's own lines (its evaluation prints progress)
    manifest = tmp_path / "m.yaml"
    text = (
        (straight.base / "dense.yaml")
        .read_text()
        .replace("name: f-run", "name: f-run\nsplit: valid\nrenders: [curves]")
    )
    manifest.write_text(text + "claims: [{id: a, text: t, check: 'valid_bits[] < 10'}]\n")
    args = ["--allow-read", str(straight.base)]
    summary = run.summary()
    (run.path / "summary.json").write_text(json.dumps({**summary, "valid_bits": "abc", "test_bits": math.inf}))
    assert main(["status", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)  # strict JSON: no Infinity
    assert rows[0]["test_bits"] is None and rows[0]["valid_bits"] == "abc"
    assert main([*args, "report", str(manifest)]) == 0
    assert "is 'abc', not a number" in capsys.readouterr().out
    (run.path / "summary.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["status"]) == 0
    assert f"corrupt: {run.path / 'summary.json'}: corrupt" in capsys.readouterr().out
    assert main([*args, "report", str(manifest)]) == 0
    assert main([*args, "run", str(manifest), "--dry-run"]) == 0
    assert f"{run.run_id}  f-run  -  [corrupt summary: redone by run]" in capsys.readouterr().out
    (run.path / "summary.json").write_text(json.dumps(summary))
    metrics = run.metrics_path.read_bytes()
    for damage in (os.urandom(3000), metrics[:40] + b'"' + metrics[40:]):
        run.metrics_path.write_bytes(damage)
        assert main([*args, "report", str(manifest)]) == 0
    capsys.readouterr()
    figures = tmp_path / "results" / "reports" / "figures"
    shutil.rmtree(figures)
    figures.write_text("")
    assert "cannot create directory" in one_error(capsys, [*args, "report", str(manifest)], code=1)


def test_a_read_only_store_and_a_wandb_file_are_one_line(tmp_path, straight, write_manifest, kid, monkeypatch, capsys):
    straight()
    base = Path(tempfile.mkdtemp())  # world-readable, unlike pytest's tmp dirs: another user reads it
    try:
        os.chmod(base, 0o755)
        shutil.copytree(straight.base / "results", base / "results")
        shutil.copy(straight.base / "corpus.txt", base / "corpus.txt")
        manifest = base / "r.yaml"
        text = (straight.base / "dense.yaml").read_text().replace(str(straight.base), str(base))
        manifest.write_text(text)  # no figure: matplotlib as another user would build its font cache first
        monkeypatch.setenv("REPRO_RESULTS", str(base / "results"))
        for path in [*(base / "results").rglob("*"), base / "results"]:
            os.chmod(path, 0o555 if path.is_dir() else 0o444)
        code, _, err = kid(["report", str(manifest)], as_user=None if os.geteuid() else 65534)
        assert code == 1 and "Traceback" not in err, err
        assert err.strip().splitlines()[-1].endswith(": Permission denied"), err
    finally:
        for path in [*(base / "results").rglob("*"), base / "results"]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        shutil.rmtree(base)

    path = write_manifest()
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "wandb").write_text("")
    monkeypatch.setenv("WANDB_MODE", "offline")
    line = one_error(capsys, ["run", str(path)], code=1)
    assert line == f"error: {tmp_path / 'results' / 'wandb'}: cannot create directory: File exists"
    assert not (tmp_path / "results" / "runs").exists()
