from pathlib import Path

import pytest

from repro.config.spec import DataSpec, SpecError, TrainSpec, build, build_run

BASE = {
    "data": {"name": "wiki-lead8", "block": 64},
    "model": {"family": "sparse_transformer", "layers": 1, "d_model": 32, "heads": 2},
    "train": {"steps": 10},
}


def test_build_validates_keys_and_types():
    with pytest.raises(SpecError, match=r"train\.stepz: unknown key; allowed keys: .*steps"):
        build(TrainSpec, {"stepz": 3}, "train")
    with pytest.raises(SpecError, match=r"train\.steps: expected an integer, got str 'ten'"):
        build(TrainSpec, {"steps": "ten"}, "train")
    with pytest.raises(SpecError, match=r"train\.optimizer: expected one of adagrad, adam, adamw"):
        build(TrainSpec, {"optimizer": "sgd"}, "train")
    assert build(TrainSpec, {"lr": "2e-6"}, "train").lr == 2e-6  # YAML 1.1 reads 2e-6 as a string
    assert build(DataSpec, {"name": "file", "path": "x", "kind": "text8"}).options() == {"path": "x", "kind": "text8"}


def test_family_config_is_validated_with_its_key_path():
    bad = {**BASE, "model": {**BASE["model"], "pattern": "diagonal"}}
    with pytest.raises(SpecError, match=r"model\.pattern: expected one of dense, strided, fixed"):
        build_run("m", "tiny", {}, bad)
    with pytest.raises(SpecError, match=r"model\.family: expected one of"):
        build_run("m", "tiny", {}, {**BASE, "model": {"family": "rnn"}})


def test_run_id_is_stable_and_follows_the_spec():
    a = build_run("m", "tiny", {}, BASE)
    b = build_run("m", "tiny", {}, BASE)
    c = build_run("m", "tiny", {}, {**BASE, "train": {"steps": 10, "seed": 1}})
    assert a.run_id == b.run_id and len(a.run_id) == 12
    assert a.run_id != c.run_id


def test_fields_added_later_keep_earlier_run_ids():
    """A field declared with repro.config.fields.later is out of the resolved spec (and the id) at its default, in
    it when set: the paper-scale options added for the audit leave every stored tiny/small run's id alone."""
    plain = build_run("m", "tiny", {}, BASE)
    assert plain.run_id == "7f1245cdc2d3"  # the id this spec had before any later field existed
    for section, key, default, other in [
        ("train", "stream_passes", "wrap", "random_offset"),
        ("train", "select", "last", "best_valid"),
        ("model", "init", "normal", "paper"),
        ("model", "dropout_embedding", True, False),
    ]:
        assert key not in plain.resolved()[section]
        extra = {"val_every": 5} if key == "select" else {}
        same = build_run("m", "tiny", {}, {**BASE, section: {**BASE[section], key: default}})
        changed = build_run("m", "tiny", {}, {**BASE, section: {**BASE[section], key: other, **extra}})
        assert same.run_id == plain.run_id and changed.resolved()[section][key] == other
        assert changed.run_id != plain.run_id


def test_the_window_named_by_behaviour_keeps_the_ids_of_its_former_names():
    """model.window's values say what a query sees (past: eq. 5's r = t-S .. t-1; self_and_past); the
    names before them are read as the same values, and the id hashes those names, so stored ids stand."""
    span = {"family": "adaptive_span", "layers": 1, "d_model": 16, "d_ff": 32, "heads": 2}

    def run(**model):
        return build_run("m", "tiny", {}, {**BASE, "model": {**span, **model}})

    assert run(window="past").model.window == "past" and run(window="past").resolved()["model"]["window"] == "past"
    assert run(window="official").run_id == run(window="past").run_id != run().run_id
    assert run(window="past").resolved(identity=True)["model"]["window"] == "official"
    assert run(window="paper").run_id == run(window="self_and_past").run_id == run().run_id
    assert "window" not in run(window="self_and_past").resolved()["model"]  # the default, as before
    with pytest.raises(SpecError, match=r"model\.window: expected one of self_and_past, past"):
        run(window="future")


def test_a_file_corpus_is_identified_by_content_and_resolved_next_to_its_manifest(tmp_path, monkeypatch, capsys):
    """Editing corpus.txt makes a new run (not 'skipped' with old bits); the same manifest and corpus in
    another folder is the same run; a relative path is the manifest's folder's, not the working directory's."""
    from spine_manifests import tiny_manifest

    from repro.cli import main
    from repro.config import manifest as manifests

    a, b, elsewhere = (tmp_path / d for d in ("a", "b", "cwd"))
    for folder in (a, b, elsewhere):
        folder.mkdir()
    text = tiny_manifest(Path("corpus.txt")).replace('path: "corpus.txt"', "path: corpus.txt")
    for folder in (a, b):
        (folder / "m.yaml").write_text(text)
        (folder / "corpus.txt").write_text("the same corpus " * 500)
    (elsewhere / "corpus.txt").write_text("a decoy in the working directory " * 500)
    monkeypatch.chdir(elsewhere)
    (spec_a,) = manifests.load(a / "m.yaml").expand("tiny")
    (spec_b,) = manifests.load(b / "m.yaml").expand("tiny")
    assert spec_a.data.path == str(a / "corpus.txt") and spec_b.data.path == str(b / "corpus.txt")
    assert spec_a.run_id == spec_b.run_id and spec_a.data.sha256 == spec_b.data.sha256
    assert spec_a.data.label == f"corpus.txt@{spec_a.data.sha256[:8]}"
    (b / "corpus.txt").write_text("an edited corpus " * 500)
    (edited,) = manifests.load(b / "m.yaml").expand("tiny")
    assert edited.run_id != spec_a.run_id and edited.data.sha256 != spec_a.data.sha256
    # validate and --dry-run check that the file exists, with one line naming it
    (b / "corpus.txt").unlink()
    for argv in (["validate", str(b / "m.yaml")], ["run", str(b / "m.yaml"), "--dry-run"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"data.path: {b / 'corpus.txt'}" in err[0] and "No such file" in err[0]


def test_a_pinned_file_hash_must_match(tmp_path):
    from spine_manifests import tiny_manifest

    from repro.config import manifest as manifests

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("some text " * 500)
    path = tmp_path / "m.yaml"
    path.write_text(tiny_manifest(corpus).replace("kind: text8,", "kind: text8, sha256: '00ff',"))
    with pytest.raises(
        manifests.ManifestError, match="data.sha256: .*corpus.txt has sha256 [0-9a-f]{64}, expected 00ff"
    ):
        manifests.load(path)


def test_a_family_rule_holds_wherever_its_config_is_built():
    """The rules between a family's keys are its schema's validators: a model is never configured past them."""
    from repro.config.families import SparseTransformerConfig

    with pytest.raises(ValueError, match="1 to model.stride = 8"):
        SparseTransformerConfig(pattern="fixed", stride=8, c=9)
    with pytest.raises(ValueError, match=">= 2 with combine: multihead"):
        SparseTransformerConfig(pattern="strided", combine="multihead", heads=1, d_model=8)
    assert SparseTransformerConfig(pattern="fixed", stride=8, c=8).c == 8
    wide = {**BASE, "model": {**BASE["model"], "qk_mult": 0.5, "heads": 32}}  # 16 query/key dims over 32 heads
    with pytest.raises(
        SpecError, match=r"^model\.qk_mult: got 0\.5: a width of 16 does not split into model\.heads = 32"
    ):
        build_run("m", "tiny", {}, wide)
    late = {**BASE, "train": {"steps": 10, "final_phase": 11}}
    with pytest.raises(SpecError, match=r"^train\.final_phase: got 11; allowed: <= train\.steps = 10$"):
        build_run("m", "tiny", {}, late)


def test_a_key_names_itself_or_a_dotted_suffix():
    from repro.config.keys import matching, show

    grid = ["model.span.limit", "model.limit_x", "data.name"]
    assert matching("limit", grid) == ["model.span.limit"]
    assert matching("span.limit", grid) == ["model.span.limit"]
    assert matching("imit", grid) == [] and matching("name", grid) == ["data.name"]
    assert (show("x" * 100), show([1]), show({"a": 1})) == ("str '" + "x" * 75, "list", "dict")  # at most 80 characters
