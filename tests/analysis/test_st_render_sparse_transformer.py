"""Renderers of the Sparse Transformer paper on a synthetic run store (no training), and its manifests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import paper_patterns as paper
import pytest
from storekit import steady_curve

from repro.config.manifest import resolve
from repro.report import renderers
from repro.report.assemble import context
from repro.report.renderers import pyplot
from repro.report.stage import render
from repro.store.runs import RunDir

ST = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "experiments" / "sparse_transformer").glob("*.yaml"))


def _store_run(root: Path, spec, **summary) -> RunDir:
    run = RunDir(root, spec.manifest, spec.run_id)
    run.write_spec(
        {"run_id": spec.run_id, "manifest": spec.manifest, "scale": spec.scale, "cell": spec.cell, **spec.resolved()}
    )
    base = {
        "status": "finished",
        "dataset": spec.data.name,
        "scale": spec.scale,
        "params": 1000,
        "steps": spec.train.steps,
        "seconds_per_step": 0.1,
        "peak_memory_bytes": 600 * 2**20,
        "unigram_bits": 7.5,
        "ran_alone": True,  # timing claims count only runs that ran alone
    }
    run.write_summary({**base, **summary})
    steady_curve(run, summary.get("test_bits", base.get("test_bits", 4.0)))
    return run


def _render(root: Path, name: str, scale: str = "tiny"):
    return renderers.render_all(context(resolve(name), root, scale))


def _read(path: Path) -> str:
    return path.read_text()


def test_every_manifest_validates(capsys):
    from repro.cli import main

    assert len(ST) >= 15
    here = Path(__file__).resolve().parents[2] / "experiments" / "sparse_transformer"
    assert main(["validate", *(str(here / f"{n}.yaml") for n in ST)]) == 0
    assert capsys.readouterr().out.count("ok ") == len(ST)


def test_table2_puts_paper_beside_ours(tmp_path):
    m = resolve("st-table2-enwik8")
    for spec, bits, sps in zip(m.expand("tiny", seeds=1), [3.5, 3.4, 3.2], [0.09, 0.12, 0.11]):
        _store_run(tmp_path, spec, valid_bits=bits + 0.01, test_bits=bits, seconds_per_step=sps)
    files = _render(tmp_path, "st-table2-enwik8")
    assert files and all(p.exists() for p, _ in files)
    md = _read(tmp_path / "reports" / "tables" / "st-table2-enwik8-table2-tiny.md")
    assert "scale: tiny" in md and "wiki-lead" in md
    csv = pd.read_csv(tmp_path / "reports" / "tables" / "st-table2-enwik8-table2-tiny.csv").set_index("pattern")
    assert list(csv.index) == ["dense", "strided", "fixed"]
    assert list(csv["our test_bits"]) == [3.5, 3.4, 3.2]  # ours, per pattern
    assert list(csv["paper bits (test)"]) == [1.00, 1.13, 0.99]  # the paper's, beside them
    assert list(csv["paper s/iter"]) == [1.31, 0.35, 0.55]
    assert csv["our speed-up vs dense"].tolist() == pytest.approx([1.0, 0.09 / 0.12, 0.09 / 0.11])
    assert csv.loc["fixed", "paper speed-up vs dense"] == pytest.approx(1.31 / 0.55)
    # the report judges the claims on the same store
    path, results = render(m, tmp_path)
    verdicts = {r.id: (r.verdict.status, r.verdict.holds) for r in results}  # one seed: indicative
    assert verdicts["fixed-beats-strided-text"] == ("indicative (one seed)", True)
    assert verdicts["sparse-faster-text"] == ("indicative (one seed)", False)


def test_table2_images_use_valid_bits(tmp_path):
    m = resolve("st-table2-cifar10")
    for spec, bits in zip(m.expand("tiny", seeds=1), [4.1, 4.0, 4.2]):
        _store_run(tmp_path, spec, valid_bits=bits)
    _render(tmp_path, "st-table2-cifar10")
    md = _read(tmp_path / "reports" / "tables" / "st-table2-cifar10-table2-tiny.md")
    assert "fashion-mnist" in md
    csv = pd.read_csv(tmp_path / "reports" / "tables" / "st-table2-cifar10-table2-tiny.csv").set_index("pattern")
    assert "our test_bits" not in csv and list(csv["our valid_bits"]) == [4.1, 4.0, 4.2]
    assert csv.loc["strided", "paper bits (test)"] == 2.80


def test_table1_gathers_its_parts(tmp_path):
    for name, bits in [("st-table1-enwik8", {"test_bits": 3.2}), ("st-table1-cifar10", {"valid_bits": 4.0})]:
        (spec,) = resolve(name).expand("tiny", seeds=1)
        _store_run(tmp_path, spec, **bits)
    files = _render(tmp_path, "st-table1", "none")
    assert [p.suffix for p, _ in files] == [".md", ".png"] and all(p.exists() for p, _ in files)
    csv = pd.read_csv(tmp_path / "reports" / "tables" / "st-table1-table1-none.csv").set_index("paper dataset")
    assert csv.loc["enwik8", "our bits"] == 3.2 and csv.loc["enwik8", "split"] == "test"
    assert csv.loc["enwik8", "paper bits"] == 0.99 and "Transformer-XL" in csv.loc["enwik8", "best baseline (paper)"]
    assert csv.loc["CIFAR-10", "our bits"] == 4.0 and csv.loc["CIFAR-10", "split"] == "valid"
    assert csv.loc["CIFAR-10", "paper bits"] == 2.80
    assert csv.loc["ImageNet 64x64", "paper bits"] == 3.44 and pd.isna(csv.loc["ImageNet 64x64", "our bits"])
    # a part renders the same table at its own scale
    files = _render(tmp_path, "st-table1-enwik8")
    assert any("table1" in p.name for p, _ in files)


def test_table3_one_model_scored_at_each_min_context(tmp_path):
    (spec,) = resolve("st-table3").expand("tiny", seeds=1)
    sweep = dict(zip([64, 128, 192, 224], [3.30, 3.25, 3.22, 3.21]))
    _store_run(tmp_path, spec, test_bits=3.25, valid_bits=3.26, **{f"test_bits_ctx{c}": b for c, b in sweep.items()})
    _render(tmp_path, "st-table3")
    csv = pd.read_csv(tmp_path / "reports" / "tables" / "st-table3-table3-tiny.csv")
    assert list(csv["min_context"]) == [64, 128, 192, 224] and list(csv["our test bits"]) == list(sweep.values())
    md = _read(tmp_path / "reports" / "tables" / "st-table3-table3-tiny.md")
    assert "0.9908" in md and "3.21" in md
    _, results = render(resolve("st-table3"), tmp_path)
    assert [(r.id, r.verdict.holds) for r in results] == [("context-helps", True)]  # tiny claim only


def test_table3_with_seeds_shows_their_mean_and_spread(tmp_path, drawn):
    """Several seeds: the table's bits at each context are the seeds' mean, with their sd beside; the
    figure draws the spread (the seed-mean row also carries ``<metric> sd`` keys, which are no contexts)."""
    specs = resolve("st-table3").expand("tiny", seeds=2)
    contexts = [64, 128, 192, 224]
    per_seed = [[3.30, 3.25, 3.22, 3.21], [3.34, 3.27, 3.26, 3.23]]
    for spec, bits in zip(specs, per_seed):
        _store_run(
            tmp_path,
            spec,
            test_bits=bits[-1],
            valid_bits=3.26,
            **{f"test_bits_ctx{c}": b for c, b in zip(contexts, bits)},
        )
    _render(tmp_path, "st-table3")
    csv = pd.read_csv(tmp_path / "reports" / "tables" / "st-table3-table3-tiny.csv")
    assert list(csv["min_context"]) == contexts
    assert np.allclose(csv["our test bits"], np.mean(per_seed, axis=0))
    assert np.allclose(csv["sd over seeds"], np.std(per_seed, axis=0, ddof=1))
    ours = drawn["table3"][0]  # the first axes: ours (the paper's on a twin axis)
    assert np.allclose(ours["lines"][0][2], np.mean(per_seed, axis=0))
    (bars,) = ours["errorbars"]  # the seeds' spread: one bar per context, mean - sd to mean + sd
    mean, sd = np.mean(per_seed, axis=0), np.std(per_seed, axis=0, ddof=1)
    assert np.allclose([seg[:, 1] for seg in bars], np.c_[mean - sd, mean + sd])


def test_table4_picks_the_largest_model_within_budget(tmp_path):
    specs = resolve("st-table4").expand("tiny", seeds=1)
    for spec in specs:
        n, d = spec.data.seq_len, spec.model.d_model
        peak = (600 + n * d / 2**10) * 2**20  # grows with length and width
        _store_run(tmp_path, spec, valid_bits=4.0 - d / 100, params=d * 1000, peak_memory_bytes=peak)
    _render(tmp_path, "st-table4")
    largest = pd.read_csv(tmp_path / "reports" / "tables" / "st-table4-table4-largest-tiny.csv")
    assert list(largest["seq_len"]) == [1024, 4096, 16384]
    assert list(largest["largest fitting params"].fillna(0)) == [96000, 96000, 0]  # 600 + 16*96 MiB > 1 GiB
    md = _read(tmp_path / "reports" / "tables" / "st-table4-table4-tiny.md")
    assert "152M" in md and "1,024 MiB" in md


def test_fig2_draws_attention_maps(tmp_path, drawn):
    (spec,) = resolve("st-fig2").expand("tiny", seeds=1)
    run = _store_run(tmp_path, spec)
    att = np.random.default_rng(0).random((4, 2, 575)).astype(np.float32)
    att /= att.sum(-1, keepdims=True)
    run.write_arrays(
        "analysis.npz",
        {
            "attention_query": att,
            "query_position": np.array(574),
            "sequence": np.arange(784) % 256,
            "shape": np.array([28, 28, 1]),
            "layer_patterns": np.array(["dense"] * 4),
        },
    )
    files = _render(tmp_path, "st-fig2")
    assert len(files) == 1 and files[0][0].exists() and "row 20, column 14" in files[0][1]
    axes = drawn[f"fig2-{spec.run_id}"]  # (heads rows) x (input + 4 layers)
    assert len(axes) == 2 * 5
    for h in range(2):
        assert (axes[5 * h]["images"][0] == (np.arange(784) % 256).reshape(28, 28)).all()  # the input image
        for layer in range(4):
            grid = axes[5 * h + 1 + layer]["images"][0].reshape(-1)
            # input j holds element j - 1: pixel p is weighted by the query's attention to input p + 1
            assert np.allclose(grid[:574], att[layer, h, 1:]) and (grid[574:] == 0).all()


def test_fig3_needs_no_runs(tmp_path, drawn):
    """The matrices drawn are the paper's patterns (n = 36, l = 6, c = 1; ``paper_patterns``)."""
    files = _render(tmp_path, "st-fig3", "none")
    assert len(files) == 2 and all(p.exists() for p, _ in files)
    assert "every earlier input reached in 2 layers" in files[0][1]
    shown = {ax["title"]: ax["images"][0] for ax in drawn["fig3-matrices"] if ax["images"]}
    for pattern, halves in (("strided", ("local", "stride")), ("fixed", ("block", "summary"))):
        for name in (*halves, pattern):
            want = paper.mask(name, 36, 6, 1)
            assert (shown[f"{pattern}: {name if name != pattern else 'union'}"] == want).all(), name
    assert (shown["dense: union"] == np.tril(np.ones((36, 36), bool))).all()
    grid = {ax["title"]: ax["images"][0] for ax in drawn["fig3-grid"] if ax["images"]}
    row = paper.mask("strided", 36, 6)[27].astype(float)
    row[27] = 0.5  # the output itself, half-shaded
    assert (grid["strided: union"] == row.reshape(6, 6)).all()


def test_fig4_and_fig5(tmp_path, drawn):
    stored = {}
    for spec, peak, sps in zip(resolve("st-fig4").expand("tiny", seeds=1), [900, 700], [1.0, 1.3]):
        _store_run(tmp_path, spec, peak_memory_bytes=peak * 2**20, seconds_per_step=sps, valid_bits=5.0)
        stored[bool(spec.model.checkpointing)] = (peak, sps)
    files = _render(tmp_path, "st-fig4")
    assert files and files[0][0].exists()
    memory, time = drawn["fig4"]  # bars: checkpointing off, on
    assert memory["bars"] == pytest.approx([stored[False][0], stored[True][0]])
    assert time["bars"] == pytest.approx([stored[False][1], stored[True][1]])
    _, results = render(resolve("st-fig4"), tmp_path)
    assert results and all(r.verdict.holds for r in results)

    (spec,) = resolve("st-fig5").expand("tiny", seeds=1)
    run = _store_run(tmp_path, spec)
    assert [f for f in _render(tmp_path, "st-fig5") if f[0].name.startswith("st-fig5-fig5")] == []  # no samples yet
    (run.path / "samples").mkdir()
    grid = np.zeros((56, 56, 3))
    grid[:28, :28] = 1.0
    pyplot().imsave(run.path / "samples" / "seed0-temp0.9.png", grid)  # what `repro sample --temperature 0.9` names
    files = [f for f in _render(tmp_path, "st-fig5") if f[0].name.startswith("st-fig5-fig5")]
    assert len(files) == 1 and "temperature 0.9" in files[0][1] and "scale: tiny" in files[0][1]
    drawn = pyplot().imread(files[0][0])  # redrawn with its title (temperature, run, scale and data), not copied
    assert drawn.shape[0] > 56 and drawn.shape[0] > drawn.shape[1]


def test_table2_with_seeds_shows_the_spread(tmp_path, drawn):
    """Two seeds per pattern: the table's bits and s/step are the seeds' means with their sd beside; the
    speed-up is the ratio of the mean s/step, its sd propagated from both (dense's own: none); the figure
    draws those sds as bars."""
    m = resolve("st-table2-enwik8")
    per_seed = {
        "dense": ([3.5, 3.6], [0.10, 0.12]),
        "strided": ([3.4, 3.3], [0.05, 0.07]),
        "fixed": ([3.2, 3.3], [0.06, 0.06]),
    }
    done: dict[str, int] = {}
    for spec in m.expand("tiny", seeds=2):
        p = spec.model.pattern
        i = done.setdefault(p, 0)
        done[p] += 1
        bits, sps = per_seed[p]
        _store_run(tmp_path, spec, test_bits=bits[i], valid_bits=bits[i], seconds_per_step=sps[i])
    _render(tmp_path, "st-table2-enwik8")
    csv = pd.read_csv(tmp_path / "reports" / "tables" / "st-table2-enwik8-table2-tiny.csv").set_index("pattern")
    for p, (bits, sps) in per_seed.items():
        assert csv.loc[p, "our test_bits"] == pytest.approx(np.mean(bits))
        assert csv.loc[p, "our test_bits sd"] == pytest.approx(np.std(bits, ddof=1))
        assert csv.loc[p, "our s/step sd"] == pytest.approx(np.std(sps, ddof=1))
    d_mean, d_sd = np.mean(per_seed["dense"][1]), np.std(per_seed["dense"][1], ddof=1)
    s_mean, s_sd = np.mean(per_seed["strided"][1]), np.std(per_seed["strided"][1], ddof=1)
    ratio = d_mean / s_mean
    assert csv.loc["strided", "our speed-up vs dense"] == pytest.approx(ratio)
    assert csv.loc["strided", "our speed-up sd"] == pytest.approx(ratio * np.hypot(d_sd / d_mean, s_sd / s_mean))
    assert np.isnan(csv.loc["dense", "our speed-up sd"])  # dense against itself
    assert csv.loc["fixed", "our speed-up sd"] == pytest.approx(d_sd / 0.06)  # fixed's seeds agree: dense's spread
    bits_ax, speed_ax = drawn["table2"]
    (bars,) = bits_ax["errorbars"]
    lows_highs = [tuple(seg[:, 1]) for seg in bars]
    expect = [(np.mean(b) - np.std(b, ddof=1), np.mean(b) + np.std(b, ddof=1)) for b, _ in per_seed.values()]
    assert np.allclose(lows_highs, expect)
    assert speed_ax["errorbars"], "the speed-up's spread is drawn too"


@pytest.mark.parametrize(
    "name,key", [("st-ablate-stride", "stride"), ("st-ablate-c", "c"), ("st-ablate-combine", "combine")]
)
def test_ablations(tmp_path, name, key):
    """The ablation table has one row per grid value, in the grid's order, each with its own stored bits
    and seconds per step."""
    stored = {}
    for i, spec in enumerate(resolve(name).expand("tiny", seeds=1)):
        (value,) = (v for k, v in spec.cell.items() if k.rsplit(".", 1)[-1] == key)
        stored[str(value)] = (3.0 + 0.01 * i, 0.1 + 0.02 * i)
        _store_run(
            tmp_path, spec, test_bits=stored[str(value)][0], valid_bits=3.0, seconds_per_step=stored[str(value)][1]
        )
    files = _render(tmp_path, name)
    assert files and files[0][0].exists()
    csv = pd.read_csv(tmp_path / "reports" / "tables" / f"{name}-ablation-tiny.csv")
    assert [str(v) for v in csv[key]] == list(stored)  # the grid's order
    for _, row in csv.iterrows():
        bits, per_step = stored[str(row[key])]
        assert row["our test_bits"] == pytest.approx(bits) and row["our s/step"] == pytest.approx(per_step)


def test_mended_figures_read_as_they_should(tmp_path, drawn):
    """Issue 36: no gridlines over Figure 3's first column of matrices; a sample grid drawn before its
    temperature was recorded names the command that draws one with it; Table 1 at a tiny scale carries
    the banner that its bars are not the paper's numbers; the ablation's y axis is words, not a key."""
    _render(tmp_path, "st-fig3", "none")
    assert not any(ax["grid"] for ax in drawn["fig3-matrices"] if ax["images"])

    (spec,) = resolve("st-fig5").expand("tiny", seeds=1)
    run = _store_run(tmp_path, spec)
    (run.path / "samples").mkdir()
    pyplot().imsave(run.path / "samples" / "seed0.png", np.zeros((28, 28, 3)))  # an older grid's name
    (fig5,) = [f for f in _render(tmp_path, "st-fig5") if f[0].name.startswith("st-fig5-fig5")]
    assert "temperature not recorded" not in fig5[1] and f"`repro sample {spec.run_id}`" in fig5[1]

    (spec,) = resolve("st-table1-audio").expand("tiny", seeds=1)
    _store_run(tmp_path, spec, test_bits=5.3)
    _render(tmp_path, "st-table1-audio")
    (ax,) = drawn["table1"]
    assert ax["bars"] == pytest.approx([5.3, 1.97]) and "NOT the paper's numbers" in ax["title"]

    for i, spec in enumerate(resolve("st-ablate-stride").expand("tiny", seeds=1)):
        _store_run(tmp_path, spec, test_bits=3.0 + 0.01 * i, valid_bits=3.0)
    _render(tmp_path, "st-ablate-stride")
    bits, speed = drawn["ablation"]
    assert bits["ylabel"] == "test bits (seed mean)" and speed["ylabel"] == "seconds per step"


def test_a_one_seed_bar_says_n_1_clear_of_the_legend_and_error_bars_stay_inside(tmp_path, drawn):
    """Issue 62.8: st-table2 at cpu drew its one-seed dense bar unmarked under the legend, and an ablation's
    bar chart clipped its error bars (its y limits came from the means alone)."""
    m = resolve("st-table2-enwik8")
    runs = [s for s in m.expand("tiny", seeds=2) if s.model.pattern != "dense" or s.train.seed == 0]
    bits = {("dense", 0): 3.5, ("strided", 0): 3.4, ("strided", 1): 3.3, ("fixed", 0): 3.2, ("fixed", 1): 3.3}
    for spec in runs:
        _store_run(tmp_path, spec, test_bits=bits[spec.model.pattern, spec.train.seed], valid_bits=3.0)
    _render(tmp_path, "st-table2-enwik8")
    bits_ax, speed_ax = drawn["table2"]
    ((text, (x, y)),) = bits_ax["texts"]  # dense alone has one seed
    assert text == "n=1" and y == pytest.approx(3.5) and x == pytest.approx(-0.2)
    assert not bits_ax["legend_over_data"] and not speed_ax["legend_over_data"]
    csv = pd.read_csv(tmp_path / "reports" / "tables" / "st-table2-enwik8-table2-tiny.csv").set_index("pattern")
    assert csv["n"].to_dict() == {"dense": 1, "strided": 2, "fixed": 2}

    # an ablation whose seeds spread wider than its cells' means differ
    wide = {0: (3.0, 3.6), 1: (3.1, 3.15)}
    specs = resolve("st-ablate-stride").expand("tiny", seeds=2)
    cells = sorted({str(s.cell) for s in specs})
    for spec in specs:
        i = cells.index(str(spec.cell)) % 2
        _store_run(tmp_path, spec, test_bits=wide[i][spec.train.seed], valid_bits=3.0)
    _render(tmp_path, "st-ablate-stride")
    axis, _ = drawn["ablation"]
    low, high = axis["ylim"]
    ends = [seg[:, 1] for bars in axis["errorbars"] for seg in bars]
    assert ends and all(low <= e.min() and e.max() <= high for e in ends)
    assert min(e.min() for e in ends) == pytest.approx(3.3 - np.std([3.0, 3.6], ddof=1))
    assert not axis["texts"]  # every cell has two seeds
