"""The computation key (repro/store/computation.py): specs that compute the same numbers hash alike, and
only they. Checked on the models (a frontier run of a Sparse Transformer attention draws the same
parameters and computes the same outputs), on every stored pair the key calls equal (the same bits), on
keys that matter, and on real tiny runs: what the key leaves out changes no number, and `repro run`
reuses a finished run of the same computation instead of training it again."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest
import torch
import yaml

from repro.cli import main
from repro.config import manifest as manifests
from repro.config.families import FrontierConfig, SparseTransformerConfig
from repro.models import frontier, sparse_transformer
from repro.store.computation import computation, provides
from repro.store.runs import RunDir

HERE = Path(__file__).resolve().parents[2]
STORED = HERE / "results" / "runs"
ST_MODEL = "{family: sparse_transformer, pattern: dense, layers: 1, d_model: 32, heads: 2, stride: 16}"
FRONTIER_MODEL = (
    "{family: frontier, attention: dense, layers: 1, d_model: 32, heads: 2, stride: 16, positions: factorized}"
)


@pytest.mark.parametrize("attention", ["dense", "strided", "fixed"])
def test_a_frontier_sparse_transformer_draws_the_same_parameters_and_computes_the_same_outputs(attention):
    shape = {"layers": 2, "d_model": 32, "heads": 2, "dropout": 0.1, "stride": 8, "c": 2}
    torch.manual_seed(3)
    mine = frontier.Model(FrontierConfig(attention=attention, positions="factorized", **shape), 27, 64)
    torch.manual_seed(3)
    theirs = sparse_transformer.Model(SparseTransformerConfig(pattern=attention, **shape), 27, 64)
    ours = dict(mine.named_parameters())
    for name, value in theirs.named_parameters():
        block, _, rest = name.partition(".attn.")
        if rest[:2] in ("q.", "k.", "v."):  # the frontier's W_q, W_k, W_v are one fused matrix, the same draws
            i = "qkv".index(rest[0])
            mapped = ours[f"{block}.qkv.{rest[2:]}"][i * 32 : (i + 1) * 32]
        else:
            mapped = ours[name.replace("pos.0.", "rows.").replace("pos.1.", "cols.").replace("attn.proj", "proj")]
        assert torch.equal(mapped, value), name
    assert len(ours) == len(theirs.state_dict()) - 2 * 2 * 2  # 2 layers x (q, k, v -> qkv) x (weight, bias)
    x = torch.randint(0, 28, (3, 64))
    torch.manual_seed(5)  # training mode: the same dropout draws in the same order
    a = mine.train()(x).logits
    torch.manual_seed(5)
    b = theirs.train()(x).logits
    assert torch.allclose(a, b, rtol=0, atol=1e-6) and not torch.equal(a, mine.eval()(x).logits)


def _bits(summary: dict) -> dict[str, float]:
    return {k: v for k, v in summary.items() if "_bits" in k and k != "unigram_bits" and isinstance(v, float)}


def test_every_stored_pair_of_one_computation_stores_the_same_bits():
    groups: dict[str, list[RunDir]] = defaultdict(list)
    for path in sorted(STORED.glob("*/*/spec.yaml")):
        run = RunDir(HERE / "results", path.parent.parent.name, path.parent.name)
        if run.finished:
            groups[computation(run.spec())].append(run)
    shared = {key: runs for key, runs in groups.items() if len({run.run_id for run in runs}) > 1}
    ids = {key: {run.run_id for run in runs} for key, runs in shared.items()}
    assert {"6954990c7193", "79e30d0a0378"} in [i & {"6954990c7193", "79e30d0a0378"} for i in ids.values()]
    assert len(shared) >= 15  # the frontier's and the Sparse Transformer tables' cpu runs, st-fig4's, ...
    compared = 0
    for runs in shared.values():
        for i, one in enumerate(runs):
            for other in runs[i + 1 :]:
                mine, theirs = _bits(one.summary()), _bits(other.summary())
                for key in mine.keys() & theirs.keys():
                    assert math.isclose(mine[key], theirs[key], rel_tol=1e-6), (one.path, other.path, key)
                    compared += other.run_id != one.run_id
    assert compared >= 30  # numbers of two distinct ids compared (35 today)


def test_keys_that_matter_give_another_key_and_measuring_keys_do_not():
    spec = yaml.safe_load((STORED / "frontier" / "6954990c7193" / "spec.yaml").read_text())
    twin = yaml.safe_load((STORED / "st-table2-enwik8" / "79e30d0a0378" / "spec.yaml").read_text())
    assert computation(spec) == computation(twin)

    def changed(section: str, key: str, value) -> dict:
        out = yaml.safe_load(yaml.safe_dump(spec))
        out[section][key] = value
        return out

    for section, key, value in [
        ("train", "log_every", 7),
        ("train", "checkpoint_every", 10),
        ("train", "val_every", 0),
        ("train", "val_tokens", 4096),
        ("eval", "splits", ["test"]),
        ("eval", "context_sweep", [64, 256]),
    ]:
        assert computation(changed(section, key, value)) == computation(spec), key
    for section, key, value in [
        ("train", "seed", 1),
        ("train", "threads", 1),
        ("train", "precision", "bf16-mixed"),
        ("train", "steps", 1999),
        ("model", "stride", 16),
        ("model", "attention", "window"),
        ("model", "positions", "absolute"),
        ("data", "block", 256),
        ("eval", "min_context", 64),
        ("eval", "batch_size", 16),
    ]:
        assert computation(changed(section, key, value)) != computation(spec), key
    best = changed("train", "select", "best_valid")  # then the quick validations choose the weights scored
    assert computation({**best, "train": {**best["train"], "val_every": 100}}) != computation(best)
    # the frontier's unused keys of these attentions do not count; its adaptive span is no Sparse Transformer
    assert computation(changed("model", "globals", 3)) == computation(spec)
    adaptive = changed("model", "attention", "adaptive")
    assert computation({**adaptive, "model": {**adaptive["model"], "globals": 3}}) != computation(adaptive)


def test_a_frontier_run_takes_a_sparse_transformers_results_but_not_the_other_way():
    st = yaml.safe_load((STORED / "st-table2-enwik8" / "79e30d0a0378" / "spec.yaml").read_text())
    fr = yaml.safe_load((STORED / "frontier" / "6954990c7193" / "spec.yaml").read_text())
    assert provides(st, fr)  # the sweep [64, 128, 256, 448] covers the frontier's none
    assert not provides(fr, st)  # its figure arrays (attention maps) and swept contexts are missing
    assert not provides({**st, "train": {**st["train"], "log_every": 5}}, fr)  # another curve


def _manifest(tmp_path: Path, corpus: Path, name: str, model: str = ST_MODEL, train: str = "", evaluation: str = ""):
    from spine_manifests import tiny_manifest

    path = tmp_path / f"{name}.yaml"
    path.write_text(tiny_manifest(corpus, name=name, extra_train=train, extra_eval=evaluation).replace(ST_MODEL, model))
    return path


def _only(path: Path):
    (spec,) = manifests.load(path).expand("tiny")
    return spec


def test_what_the_key_leaves_out_changes_no_number_and_a_frontier_run_equals_its_sparse_transformer(
    tmp_path, corpus, capsys
):
    base = _manifest(tmp_path, corpus, "t-base")
    measured = _manifest(  # other logging, checkpoints, quick validations, sweep, recomputation
        tmp_path,
        corpus,
        "t-measured",
        model=ST_MODEL.replace("}", ", checkpointing: true}"),
        train=", val_every: 10, val_tokens: 512",
        evaluation=", context_sweep: [8]",
    )
    measured.write_text(
        measured.read_text().replace("checkpoint_every: 10, log_every: 5", "checkpoint_every: 7, log_every: 3")
    )
    other = _manifest(tmp_path, corpus, "t-frontier", model=FRONTIER_MODEL)
    a, b, c = _only(base), _only(measured), _only(other)
    assert len({a.run_id, b.run_id, c.run_id}) == 3
    assert computation(a.record(None)) == computation(b.record(None)) == computation(c.record(None))
    results = []
    for path in (base, measured, other):  # each in its own store: trained, none reused
        root = tmp_path / path.stem
        assert main(["run", str(path), "--results", str(root), "--no-wandb"]) == 0
        (found,) = root.glob("runs/*/*/summary.json")
        results.append(RunDir(root, found.parent.parent.name, found.parent.name).summary())
    assert "reused" not in capsys.readouterr().out
    (x, y, z) = results
    assert (x["valid_bits"], x["test_bits"]) == (y["valid_bits"], y["test_bits"])  # bit for bit
    assert math.isclose(x["valid_bits"], z["valid_bits"], rel_tol=1e-6)  # another kernel's rounding only
    assert math.isclose(x["test_bits"], z["test_bits"], rel_tol=1e-6)


def test_repro_run_reuses_a_finished_run_of_the_same_computation_and_trains_what_it_does_not_provide(
    tmp_path, corpus, capsys
):
    root = tmp_path / "results"
    base = _manifest(tmp_path, corpus, "t-base", evaluation=", context_sweep: [8]")
    fewer = _manifest(tmp_path, corpus, "t-fewer", evaluation=", splits: [test]")  # scores less: provided
    other = _manifest(tmp_path, corpus, "t-frontier", model=FRONTIER_MODEL)  # a frontier run: provided
    more = _manifest(tmp_path, corpus, "t-more", evaluation=", context_sweep: [8, 12]")  # sweeps more: trained
    assert main(["run", str(base), "--results", str(root), "--no-wandb"]) == 0
    source = RunDir(root, "t-base", _only(base).run_id)
    capsys.readouterr()
    for path in (fewer, other):
        assert main(["run", str(path), "--results", str(root), "--no-wandb"]) == 0
        spec = _only(path)
        assert spec.run_id != source.run_id
        assert f"  reused: t-base/{source.run_id} (same computation), not retrained" in capsys.readouterr().out
        run = RunDir(root, spec.manifest, spec.run_id)
        stored, summary = run.spec(), run.summary()  # its own spec, hashing to its own id
        assert stored["run_id"] == spec.run_id and stored["model"]["family"] == spec.family
        assert stored["code_version"] == source.spec()["code_version"]
        assert summary["reused_from"] == f"t-base/{source.run_id}" and summary["family"] == spec.family
        assert (summary["manifest"], summary["run_id"]) == (spec.manifest, spec.run_id)
        assert (summary["valid_bits"], summary["test_bits"]) == (
            source.summary()["valid_bits"],
            source.summary()["test_bits"],
        )
        assert run.metrics_path.read_bytes() == source.metrics_path.read_bytes()
        assert run.last_checkpoint is None  # another id's checkpoint would not load as this run's
    assert not (RunDir(root, "t-frontier", _only(other).run_id).path / "analysis.npz").exists()
    assert main(["run", str(more), "--results", str(root), "--no-wandb"]) == 0
    trained = RunDir(root, "t-more", _only(more).run_id).summary()
    assert "reused" not in capsys.readouterr().out and "reused_from" not in trained
    assert trained["test_bits"] == source.summary()["test_bits"] and "test_bits_ctx12" in trained
