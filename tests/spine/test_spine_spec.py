import pytest

from repro.spec import DataSpec, SpecError, TrainSpec, build, build_run

BASE = {"data": {"name": "wiki-lead8", "block": 64},
        "model": {"family": "sparse_transformer", "layers": 1, "d_model": 32, "heads": 2},
        "train": {"steps": 10}}


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
