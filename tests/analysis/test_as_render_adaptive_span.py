"""The adaptive-span renderers and manifests on a synthetic run store (no training).

Each shipped experiments/adaptive_span manifest is expanded at the tiny scale, every run gets a made-up
but well-formed spec.yaml / summary.json / analysis.npz, and `repro report` must write the figures and
tables with our values beside the paper's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from storekit import steady_curve

from repro import cli
from repro.config import manifest as manifests
from repro.models.flops import flops_per_token, paper_table_flops
from repro.report import stage as report
from repro.report.renderers import format_value, load, registry
from repro.store.runs import RunDir

_AS = load(manifests.analysis_root() / "adaptive_span.py")  # the renderer file, as `repro report` loads it
layer_halves, mask_curve, paper_flops = _AS.layer_halves, _AS.mask_curve, _AS.paper_flops
AS_DIR = Path(__file__).resolve().parents[2] / "experiments" / "adaptive_span"
NAMES = [
    "as-table1",
    "as-table2",
    "as-table3",
    "as-fig1",
    "as-fig2",
    "as-fig3",
    "as-fig4",
    "as-fig5",
    "as-ablate-ramp",
    "as-ablate-lambda",
]
PHRASE = "overlooks the park and its numerous"


def _load(name: str) -> manifests.Manifest:
    return manifests.load(AS_DIR / f"{name}.yaml")


def _fake_store(root: Path, m: manifests.Manifest, scale: str = "tiny", seeds: int = 1) -> list:
    """Write one finished, plausible run per spec of ``m`` at ``scale`` (``seeds`` replicates per cell: the
    bits differ by run, i, which counts every cell's first seed, then every cell's second)."""
    specs = m.expand(scale, seeds=seeds)
    for i, spec in enumerate(specs):
        c, span = spec.model, spec.model.span
        L, H, S, R = c.layers, c.heads, span.limit, span.ramp
        if span.kind == "fixed":
            zs = [[float(S)] * H for _ in range(L)]
            effs = zs
        else:  # lower layers short, upper layers longer
            zs = [[float(min(S, R * layer * (h + 1) / 2)) for h in range(H)] for layer in range(L)]
            effs = [[min(S, z + R) for z in layer] for layer in zs]
        flat = [e for layer in effs for e in layer]
        window = 0.3 if span.kind == "fixed" and S == R else 0.0  # a window of R keys: worse, as it should be
        run = RunDir(root, m.name, spec.run_id)
        run.write_spec(
            {
                "run_id": spec.run_id,
                "manifest": m.name,
                "scale": scale,
                "cell": spec.cell,
                "code_version": "test",
                **spec.resolved(),
            }
        )
        run.write_summary(
            {
                "status": "finished",
                "dataset": spec.data.name,
                "scale": scale,
                "valid_bits": 2.5 - 0.01 * i + window,
                "test_bits": 2.52 - 0.01 * i + window,
                "avg_span": sum(flat) / len(flat),
                "spans": zs,
                "effective_spans": effs,
                "span_limit": S,
                "span_max": max(max(layer) for layer in zs),
                "unigram_bits": 4.1,
                "params": 300000 + i,
                "steps": spec.train.steps,
                "seconds_per_step": 0.1,
                "flops_per_token": flops_per_token(
                    layers=L, d_model=c.d_model, d_ff=c.d_ff, heads=H, vocab_size=27, spans=effs
                ),
                **dict(zip(("span_lower_half", "span_upper_half"), layer_halves(zs))),
                **({"dynamic_span_mean": 20.0} if span.kind == "dynamic" else {}),
            }
        )
        steady_curve(run, 2.52 - 0.01 * i + window)
        x = np.arange(S)
        att = np.full((L, H, S), 1.0 / S)
        att[0, 0] = np.exp(-x / 3.0) / np.exp(-x / 3.0).sum()  # one local head
        arrays = {"attention_by_distance": att}
        if span.kind == "dynamic":
            arrays["dynamic_spans"] = np.linspace(5, 50, len(PHRASE))
            arrays["dynamic_spans_text"] = np.array(list(PHRASE))
        run.write_arrays("analysis.npz", arrays)
    return specs


def test_manifests_validate(capsys):
    assert cli.main(["validate", *(str(AS_DIR / f"{n}.yaml") for n in NAMES)]) == 0
    out = capsys.readouterr().out
    assert all(f"ok  {n}" in out for n in NAMES)
    for name in NAMES:
        m = _load(name)
        cpu = {"cpu"} if name in {"as-fig3", "as-fig4", "as-table1", "as-table3", "as-ablate-lambda"} else set()
        gpu10 = {"gpu10"} if name in {"as-fig3", "as-fig4"} else set()  # the lent GPU's findings campaign
        released = {"pretrained"} if name in {"as-table1", "as-table2"} else set()  # the authors' weights, scored
        assert set(m.scale_names()) == {"tiny", "small", "paper"} | cpu | gpu10 | released, name
        assert set(m.renders) <= set(registry()), name
        modes = {s.model.span.loss_mode for scale in m.scale_names() for s in m.expand(scale)}
        assert modes == {"mean_times_S"}, (name, modes)  # the official span loss, at every scale


def test_table1_variants_are_the_paper_rows_and_the_fixed_window_of_r():
    m = _load("as-table1")
    paper = {s.cell["variant"]: s for s in m.expand("paper")}
    assert list(paper) == ["fixed-512", "adaptive-small", "adaptive-large", "fixed-32"]
    assert paper["fixed-512"].model.span.kind == "fixed" and paper["fixed-512"].model.span.limit == 512
    for scale in ("tiny", "cpu", "paper"):  # the control: a fixed span of R, the window adaptive spans start from
        cells = {s.cell["variant"]: s for s in m.expand(scale)}
        window, small = cells["fixed-32"].model.span, cells["adaptive-small"].model.span
        assert (window.kind, window.limit, small.init) == ("fixed", small.ramp, 0.0), scale
    small, large = paper["adaptive-small"], paper["adaptive-large"]
    assert (small.model.layers, small.model.d_model, small.model.span.limit, small.train.steps) == (
        12,
        512,
        8192,
        900000,
    )
    assert small.model.span.loss_coef == 0.5e-6 and small.train.optimizer == "adagrad" and small.train.lr == 0.07
    assert (large.model.layers, large.model.d_model, large.model.d_ff, large.model.dropout) == (24, 768, 4096, 0.4)
    assert (large.train.steps, large.train.final_phase) == (270000, 20000)  # 250k + 20k at lr / 10
    assert _load("as-table2").expand("paper")[2].train.steps == 170000  # 150k + 20k at lr / 10
    tiny = m.expand("tiny", seeds=1)
    assert all(s.data.name == "wiki-lead8" and s.data.block == 64 for s in tiny)
    assert {s.data.vocab for s in _load("as-table2").expand("tiny", seeds=1)} == {"as205"}


def test_variant_errors(tmp_path):
    text = (AS_DIR / "as-table1.yaml").read_text().replace("- {name: adaptive-small}", "- {nme: adaptive-small}", 1)
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(manifests.ManifestError, match="variant"):
        manifests.load(bad)


def test_soft_mask_and_helpers():
    x = np.array([0, 10, 64, 80, 96, 200])
    assert mask_curve(x, 64, 32).tolist() == [1, 1, 1, 0.5, 0, 0]
    assert layer_halves([[1, 1], [2, 2], [9, 9]]) == (1.0, 9.0)
    spans = [[40.0, 100.0], [32.0, 300.0]]
    kw = dict(layers=2, d_model=64, d_ff=256, heads=2, vocab_size=27, spans=spans)
    avg = float(np.mean(spans))
    run = pd.Series(
        {
            "flops_per_token": flops_per_token(**kw),
            "avg_span": avg,
            "model.layers": 2,
            "model.d_model": 64,
            "model.heads": 2,
        }
    )
    assert paper_flops(run) == pytest.approx(paper_table_flops(**kw))
    # linear in the summary's numbers: the seed means of two runs give the mean of their paper FLOPs
    other = [[33.0, 64.0], [32.0, 120.0]]
    kw2 = kw | {"spans": other}
    mean = pd.Series(
        run.to_dict()
        | {
            "flops_per_token": (flops_per_token(**kw) + flops_per_token(**kw2)) / 2,
            "avg_span": (avg + float(np.mean(other))) / 2,
        }
    )
    assert paper_flops(mean) == pytest.approx((paper_table_flops(**kw) + paper_table_flops(**kw2)) / 2)


@pytest.mark.parametrize("name", ["as-table1", "as-table2", "as-table3"])
def test_tables(tmp_path, name):
    root = tmp_path / "results"
    m = _load(name)
    _fake_store(root, m)
    path, results = report.render(m, root)
    text = path.read_text()
    table = root / "reports" / "tables" / f"{name}-{name.split('-')[1]}-tiny.md"
    assert table.exists() and table.with_suffix(".csv").exists()
    body = table.read_text()
    paper_row = m.reference[name.split("-")[1]][-1]  # the paper's large / dynamic row
    assert paper_row["model"] in body and format_value(paper_row["dev_bpc"]) in body
    assert "ours:" in body and "| 2.5 |" in body  # our first run's dev bits
    assert all(line in text for line in body.splitlines() if not line.startswith("#"))  # inlined in the report
    assert "scale: tiny" in body and "wiki-lead" in body
    judged = [r for r in results if r.verdict.control != "initial-span control"]  # far below S holds at z = 0
    assert judged and all(r.verdict.status == "indicative (one seed)" for r in judged)  # one seed: judged


def _ramp(x, z, R):
    """m_z(x) of the paper's eq. (1), written out here: 1 up to z, linear to 0 at z + R."""
    return np.clip((R + z - x) / R, 0.0, 1.0)


def _stored(root: Path, m: manifests.Manifest) -> list[tuple]:
    """(spec, summary) of every run the fake store holds, in grid order."""
    return [(spec, RunDir(root, m.name, spec.run_id).summary()) for spec in m.expand("tiny", seeds=1)]


def _check_drawn(name: str, m: manifests.Manifest, root: Path, drawn: dict) -> None:
    """What each figure plots is the stored runs' data (the fake store's values), panel by panel."""
    runs = _stored(root, m)
    if name == "as-fig1":  # fixed-span runs: the most local head (layer 1, head 1) and a long one
        for spec, _ in runs:
            S = spec.model.span.limit
            left, right = drawn[f"fig1-{spec.run_id}"]
            x = np.arange(S)
            assert np.allclose(left["lines"][0][2], np.exp(-x / 3.0) / np.exp(-x / 3.0).sum())
            assert np.allclose(right["lines"][0][2], 1.0 / S)
    elif name == "as-fig2":
        ref = m.reference["fig2"]
        formula, learned = drawn["fig2"]
        _, x, y = formula["lines"][0]
        assert np.allclose(y, _ramp(x, ref["z"], ref["ramp"]))
        spec, summary = next((sp, su) for sp, su in runs if sp.model.span.kind == "adaptive")
        zs = [z for layer in summary["spans"] for z in layer]
        assert len(learned["lines"]) == len(zs)
        for (_, x, y), z in zip(learned["lines"], zs):
            assert np.allclose(y, _ramp(x, z, spec.model.span.ramp))
    elif name == "as-fig3":
        bits, spans, _ = drawn["fig3"][:3]
        for kind in {sp.model.span.kind for sp, _ in runs}:
            mine = sorted((sp.model.span.limit, su) for sp, su in runs if sp.model.span.kind == kind)
            for panel, key in ((bits, "valid_bits"), (spans, "avg_span")):
                (_, x, y) = next(line for line in panel["lines"] if line[0] == f"ours: {kind}")
                assert x.tolist() == [S for S, _ in mine] and np.allclose(y, [su[key] for _, su in mine])
    elif name == "as-fig4":
        for spec, summary in runs:
            points = np.concatenate(drawn[f"fig4-{spec.run_id}"][0]["points"])  # one scatter per layer
            layers = [np.full(len(layer), i + 1) for i, layer in enumerate(summary["effective_spans"])]
            assert np.allclose(points[:, 1], np.concatenate(summary["effective_spans"]))
            assert (np.abs(points[:, 0] - np.concatenate(layers)) <= 0.15).all()
    elif name == "as-fig5":
        (spec, _) = next((sp, su) for sp, su in runs if sp.model.span.kind == "dynamic")
        assert np.allclose(drawn[f"fig5-{spec.run_id}"][0]["bars"], np.linspace(5, 50, len(PHRASE)))
    elif name == "as-ablate-ramp":
        by_r = sorted((sp.model.span.ramp, su) for sp, su in runs)
        for ax, key in zip(drawn["ramp"], ("valid_bits", "span_max")):  # z, not z + R (issue 49.3)
            _, x, y = ax["lines"][0]
            assert x.tolist() == [r for r, _ in by_r] and np.allclose(y, [su[key] for _, su in by_r])
    elif name == "as-ablate-lambda":
        (ax,) = drawn["lambda"]
        for S in {sp.model.span.limit for sp, _ in runs}:
            mine = sorted((su["avg_span"], su["valid_bits"]) for sp, su in runs if sp.model.span.limit == S)
            _, x, y = next(line for line in ax["lines"] if line[0] == f"S={S}")
            assert np.allclose(sorted(zip(x, y)), mine)  # one point per lambda
    else:
        raise AssertionError(f"no check of {name}'s figure data")


@pytest.mark.parametrize(
    "name,stems",
    [
        ("as-fig1", ["fig1-"]),
        ("as-fig2", ["fig2"]),
        ("as-fig3", ["fig3"]),
        ("as-fig4", ["fig4-"]),
        ("as-fig5", ["fig5-"]),
        ("as-ablate-ramp", ["ramp"]),
        ("as-ablate-lambda", ["lambda"]),
    ],
)
def test_figures(tmp_path, name, stems, drawn):
    root = tmp_path / "results"
    m = _load(name)
    _fake_store(root, m)
    path, results = report.render(m, root)
    figures = root / "reports" / "figures"
    for stem in stems:
        pngs = list(figures.glob(f"{name}-{stem}*tiny.png"))
        assert pngs, (name, stem, sorted(p.name for p in figures.iterdir()))
        assert pngs[0].with_suffix(".pdf").exists()
    _check_drawn(name, m, root, drawn)
    text = path.read_text()
    assert "scale: tiny" in text
    # every claim judged, except those the initial-span control stops: a span far below S holds at z = 0
    judged = [r for r in results if r.verdict.control != "initial-span control"]
    assert all(r.verdict.status != "not evaluable" for r in judged), [r.verdict for r in judged]
    if name == "as-fig4":
        judged = {r.id: r.verdict for r in results}  # synthetic spans grow with depth by more than R/4
        assert judged["upper-layers-longer"].holds and "upper-layers-longer" in text
    if name == "as-fig3":
        table = pd.read_csv(root / "reports" / "tables" / "as-fig3-fig3-tiny.csv")
        stored = {(sp.model.span.kind, sp.model.span.limit): su["valid_bits"] for sp, su in _stored(root, m)}
        assert dict(zip(zip(table["kind"], table["S"]), table["dev bits"])) == pytest.approx(stored)


def test_fig3_draws_the_seed_spread(tmp_path, drawn):
    """Two seeds per cell: each point of Figure 3 is the cell's seed mean, with a bar from mean - sd to
    mean + sd (dev bits and average span), and the figure's data table carries the sd."""
    root = tmp_path / "results"
    m = _load("as-fig3")
    specs = _fake_store(root, m, seeds=2)
    cells: dict[tuple, list[dict]] = {}
    for spec in specs:
        key = (spec.model.span.kind, spec.model.span.limit)
        cells.setdefault(key, []).append(RunDir(root, m.name, spec.run_id).summary())
    assert all(len(v) == 2 for v in cells.values())
    report.render(m, root)
    bits, spans, _ = drawn["fig3"][:3]
    for panel, key in ((bits, "valid_bits"), (spans, "avg_span")):
        for kind in {k for k, _ in cells}:
            mine = sorted((S, [su[key] for su in runs]) for (k, S), runs in cells.items() if k == kind)
            mean = [np.mean(v) for _, v in mine]
            sd = [np.std(v, ddof=1) for _, v in mine]
            (_, x, y) = next(line for line in panel["lines"] if line[0] == f"ours: {kind}")
            assert x.tolist() == [S for S, _ in mine] and np.allclose(y, mean)
            drawn_bars = {
                (seg[0, 0], seg[0, 1], seg[1, 1]) for bars in panel["errorbars"] for seg in bars
            }  # (S, low, high)
            for S, m_, s_ in zip(x, mean, sd):
                assert any(b[0] == S and np.isclose(b[1], m_ - s_) and np.isclose(b[2], m_ + s_) for b in drawn_bars)
    csv = pd.read_csv(root / "reports" / "tables" / "as-fig3-fig3-tiny.csv")
    first = csv.iloc[0]
    runs = cells[(first["kind"], int(first["S"]))]
    assert first["dev bits sd"] == pytest.approx(np.std([r["valid_bits"] for r in runs], ddof=1))


def test_fig3_one_seed_has_no_spread_columns(tmp_path, drawn):
    root = tmp_path / "results"
    m = _load("as-fig3")
    _fake_store(root, m)
    report.render(m, root)
    csv = pd.read_csv(root / "reports" / "tables" / "as-fig3-fig3-tiny.csv")
    assert not [c for c in csv.columns if c.endswith(" sd")]
    assert not any(ax["errorbars"] for ax in drawn["fig3"])


def test_fig3_names_the_unit_of_the_data_its_runs_trained_on(tmp_path, drawn):
    """Issue 62.8: as-fig3 at cpu (linux-doc, bytes) labelled its bits "per character"; the unit is the
    dataset's (each run's summary records ``dataset_unit``)."""
    root = tmp_path / "results"
    m = _load("as-fig3")
    specs = _fake_store(root, m)
    for unit in ("byte", "char"):
        for spec in specs:
            RunDir(root, m.name, spec.run_id).update_summary(dataset_unit=unit)
        report.render(m, root)
        assert drawn["fig3"][0]["ylabel"] == f"dev bits per {unit}"
        assert drawn["curves"][0]["ylabel"] == f"bits per {unit}"


@pytest.mark.parametrize("name,stem", [("as-ablate-ramp", "ramp"), ("as-ablate-lambda", "lambda")])
def test_ablation_figures_draw_the_seed_spread(tmp_path, drawn, name, stem):
    """With two seeds a cell, the ablation figures draw a bar per point (dev bits; lambda: average span
    too), and their data tables carry the sd of the bits."""
    root = tmp_path / "results"
    m = _load(name)
    specs = _fake_store(root, m, seeds=2)
    report.render(m, root)
    cells = len(specs) // 2
    bars = [seg for ax in drawn[stem] for bars in ax["errorbars"] for seg in bars]
    assert len(bars) >= cells * (2 if name == "as-ablate-lambda" else 1)
    heights = [seg[1, 1] - seg[0, 1] for seg in bars if seg[0, 0] == seg[1, 0] and seg[0, 1] != seg[1, 1]]  # 2 sd
    assert heights and np.allclose(heights[0] / 2, 0.01 * cells / np.sqrt(2))  # two seeds i apart by `cells`
    csv = pd.read_csv(root / "reports" / "tables" / f"{name}-{stem}-tiny.csv")
    assert np.allclose(csv["dev bits sd"], 0.01 * cells / np.sqrt(2))


def test_mended_figures_read_as_they_should(tmp_path, drawn):
    """Issue 36: Figure 3's legends lie under its panels, not over the points; Figure 4's title gives S as
    the integer it is; Table 1's caption names the paper's dataset and ours apart; a variant's valid curve
    has its train curve's colour, and a scale without quick validation says so; a derived manifest's
    figure names its overrides."""
    from repro.config import overrides

    root = tmp_path / "results"
    report.render(_load("as-fig3"), root)  # nothing stored: no figure
    _fake_store(root, _load("as-fig3"))
    report.render(_load("as-fig3"), root)
    assert [ax["legend_over_data"] for ax in drawn["fig3"][:3]] == [False, False, False]
    assert "NOT the paper's numbers" in drawn["fig3"][0]["suptitle"]

    specs = _fake_store(root, _load("as-fig4"))
    report.render(_load("as-fig4"), root)
    title = drawn[f"fig4-{specs[0].run_id}"][0]["suptitle"]
    assert f"(S={specs[0].model.span.limit})" in title and ".0)" not in title

    m = _load("as-table1")
    specs = _fake_store(root, m)
    report.render(m, root)
    assert "(no run logged quick validation)" in drawn["curves"][0]["title"]  # the fake store logged none
    for spec in specs:
        RunDir(root, m.name, spec.run_id).append_metrics(
            [{"step": 10, "train/bits": 3.0}, {"step": 20, "train/bits": 2.8, "valid/bits_quick": 2.9}]
        )
    report.render(m, root)
    (curves,) = drawn["curves"]
    colors = curves["colors"]
    for variant in ("fixed-512", "adaptive-small", "adaptive-large"):
        assert colors[f"variant={variant} (valid)"] == colors[f"variant={variant} (train)"]
    assert len({colors[f"variant={v} (train)"] for v in ("fixed-512", "adaptive-small", "adaptive-large")}) == 3
    assert "no run logged" not in curves["title"]
    table = (root / "reports" / "tables" / "as-table1-table1-tiny.md").read_text().splitlines()[0]
    assert table.startswith("# Table 1: bits per character") and "(text8)" not in table.split("—")[0]
    assert "the paper's rows (on text8) beside ours (scale: tiny | data: wiki-lead" in table

    derived = overrides.derive(AS_DIR / "as-fig3.yaml", ["train.steps=100"])
    _fake_store(root, derived)
    report.render(derived, root)
    assert "Figure 3: fixed vs adaptive span as S grows [train.steps=100]" in drawn["fig3"][0]["suptitle"]
