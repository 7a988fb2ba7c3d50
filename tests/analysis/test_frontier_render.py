"""The frontier renderer (analysis/frontier.py) on a synthetic store of the frontier manifest's tiny runs,
3 seeds per attention: what it draws (the points, the seeds' spreads, the Pareto front, the papers'
comparisons), which runs its time panel leaves out and what its caption and table say."""

from __future__ import annotations

import json

import matplotlib.axes
import numpy as np
import pandas as pd
import pytest

from repro.config import manifest as manifests
from repro.config.families import ATTENTIONS
from repro.config.manifest import resolve
from repro.report.assemble import context
from repro.report.renderers import Context, load
from repro.store.runs import RunDir

_FRONTIER = load(manifests.analysis_root() / "frontier.py")  # the renderer file, as `repro report` loads it
M = resolve("frontier")
LAYERS, D = M.expand("tiny")[0].model.layers, M.expand("tiny")[0].model.d_model

# per attention: test bits, keys per query and seconds per step of seeds 0, 1, 2, and which seeds ran alone;
# an attention registered after these gets BEHIND (worse bits at more keys than dense: off every front)
BEHIND = ([3.90, 3.91, 3.89], [130.0] * 3, [0.50, 0.52, 0.51], [True, True, True])
OWN = {
    "dense": ([3.60, 3.62, 3.61], [128.5] * 3, [0.30, 0.31, 0.29], [False, False, False]),
    "window": ([3.76, 3.74, 3.75], [38.6] * 3, [0.12, 0.12, 0.13], [True, True, True]),
    "adaptive": ([3.64, 3.67, 3.65], [18.0, 22.0, 21.0], [0.15, 0.14, 0.16], [True, True, True]),
    "dynamic": ([3.70, 3.71, 3.69], [30.0, 31.0, 29.0], [0.20, 0.22, 0.21], [True, True, True]),
    "strided": ([3.72, 3.73, 3.71], [38.5] * 3, [0.11, 0.10, 0.12], [True, True, True]),
    "fixed": ([3.63, 3.62, 3.66], [38.5] * 3, [0.09, 0.10, 0.40], [True, True, False]),
    "longformer": ([3.80, 3.81, 3.79], [37.0] * 3, [0.13, 0.12, 0.14], [True, True, True]),
}
SEEDS = {name: OWN.get(name, BEHIND) for name in ATTENTIONS}  # every registered attention: the manifest's variants


# quick-validation bits at steps 200, 400, 600, 800 (tiny: 800 steps, so the last fifth starts after 640)
CURVES = {"dense": [4.6, 4.3, 4.1, 3.95], "fixed": [4.5, 4.2, 4.10, 4.09]}
FLAT = [4.5, 4.2, 4.11, 4.10]


def _store(root, seeds=SEEDS):
    for spec in M.expand("tiny", seeds=3):
        name, seed = spec.cell["variant"], spec.train.seed
        bits, keys, sps, alone = (v[seed] for v in seeds[name])
        run = RunDir(root, M.name, spec.run_id)
        run.write_spec(
            {"run_id": spec.run_id, "manifest": M.name, "scale": "tiny", "cell": spec.cell, **spec.resolved()}
        )
        run.write_summary(
            {
                "status": "finished",
                "dataset": spec.data.name,
                "scale": "tiny",
                "params": 1000,
                "steps": spec.train.steps,
                "test_bits": bits,
                "valid_bits": bits + 0.4,
                "unigram_bits": 5.3,
                "attn_keys_per_query": keys,
                "flops_per_token": 1e5 + 2 * LAYERS * 2 * D * keys,
                "seconds_per_step": sps,
                "ran_alone": alone,
            }
        )
        quick = CURVES.get(name, FLAT)
        rows = [{"step": 200 * (i + 1), "valid/bits_quick": b} for i, b in enumerate(quick)]
        # the training bits the trajectory gate falls back to where a curve has no quick validation
        run.append_metrics([{**row, "train/bits": bits + 1.0 / (i + 1)} for i, row in enumerate(rows)])


def _attention_flops(keys):
    return 2.0 * LAYERS * np.asarray(keys) * 2 * D


def _front(points: dict[str, tuple[float, float]]) -> set[str]:
    """Pareto front by a sweep (not the renderer's pairwise test): in order of x, a point is on it when its
    y is below every y seen at smaller x."""
    best, on = np.inf, set()
    for name, (_, y) in sorted(points.items(), key=lambda kv: kv[1]):
        if y < best:
            on.add(name)
            best = y
    return on


def _render(tmp_path, drawn, seeds=SEEDS):
    _store(tmp_path, seeds)
    files = _FRONTIER.frontier(context(M, tmp_path, "tiny"))
    (table, _), (figure, caption) = files
    assert figure.exists() and figure.with_suffix(".pdf").exists()
    flops_ax, time_ax = drawn["frontier"]
    return table, caption, flops_ax, time_ax


def _points(ax) -> dict[str, tuple[float, float]]:
    """The attentions' points of a panel: {label: (x, y)}."""
    return {label: (float(x[0]), float(y[0])) for label, x, y in ax["lines"] if label in SEEDS and len(x) == 1}


def _bars(ax, vertical: bool) -> list[tuple[float, float, float]]:
    """Error bars of a panel as (where, low, high): vertical bars at their x, horizontal ones at their y."""
    out = []
    for collection in ax["errorbars"]:
        for seg in collection:
            (x0, y0), (x1, y1) = seg
            if not np.all(np.isfinite(seg)):
                continue
            if vertical and x0 == x1 and y0 != y1:
                out.append((x0, min(y0, y1), max(y0, y1)))
            elif not vertical and y0 == y1 and x0 != x1:
                out.append((y0, min(x0, x1), max(x0, x1)))
    return out


def _bar_at(bars, where, low, high):
    return any(
        w == pytest.approx(where) and lo == pytest.approx(low) and hi == pytest.approx(high) for w, lo, hi in bars
    )


def test_the_flops_panel_draws_every_attention_at_its_seed_means_with_their_spreads(tmp_path, drawn):
    _, _, flops_ax, _ = _render(tmp_path, drawn)
    points = _points(flops_ax)
    assert set(points) == set(SEEDS)
    vertical, horizontal = _bars(flops_ax, True), _bars(flops_ax, False)
    for name, (bits, keys, _, _) in SEEDS.items():
        x, y = _attention_flops(keys).mean(), np.mean(bits)
        assert points[name] == pytest.approx((x, y))
        sd = np.std(bits, ddof=1)  # the spread of the seeds' test bits, drawn as a vertical bar
        assert _bar_at(vertical, x, y - sd, y + sd), name
    # the learned spans' FLOPs are an outcome: their seeds' spread is drawn across
    sd = _attention_flops(SEEDS["adaptive"][1]).std(ddof=1)
    x, y = points["adaptive"]
    assert _bar_at(horizontal, y, x - sd, x + sd)


def test_the_pareto_front_is_the_attentions_no_other_beats_on_both(tmp_path, drawn):
    table, caption, flops_ax, time_ax = _render(tmp_path, drawn)
    points = _points(flops_ax)
    expected = _front(points)
    assert expected == {"adaptive", "fixed", "dense"}  # the data are made so; strided sits behind fixed
    (front,) = [(x, y) for label, x, y in flops_ax["lines"] if label == "Pareto front"]
    drawn_on = {n for n, (x, y) in points.items() if any(np.isclose(front[0], x) & np.isclose(front[1], y))}
    assert drawn_on == expected
    assert list(front[0]) == sorted(front[0])  # a staircase, left to right
    frame = pd.read_csv(table.with_suffix(".csv")).set_index("attention")
    assert set(frame.index[frame["on bits/FLOPs front"]]) == expected
    assert "On the bits/FLOPs front: " + ", ".join(n for n in SEEDS if n in expected) in caption
    timed = _points(time_ax)
    assert set(frame.index[frame["on bits/time front"]]) == _front(timed)


def test_runs_that_shared_the_machine_are_left_out_of_the_time_panel_and_the_caption_says_so(tmp_path, drawn):
    table, caption, _, time_ax = _render(tmp_path, drawn)
    points = _points(time_ax)
    assert "dense" not in points  # no seed of dense ran alone
    _, _, sps, alone = SEEDS["fixed"]
    timed = [s for s, a in zip(sps, alone) if a]  # seed 2 (0.40 s, shared) is left out
    assert points["fixed"] == pytest.approx((np.mean(timed), np.mean(SEEDS["fixed"][0])))
    sd = np.std(timed, ddof=1)
    x, y = points["fixed"]
    assert _bar_at(_bars(time_ax, False), y, x - sd, x + sd)
    assert "left out, having shared the machine: dense (0 of 3 seeds ran alone), fixed (2 of 3))" in caption
    frame = pd.read_csv(table.with_suffix(".csv")).set_index("attention")
    assert np.isnan(frame.loc["dense", "s/step (alone)"]) and frame.loc["fixed", "timed seeds"] == 2
    assert not frame.loc["dense", "on bits/time front"]


def test_with_no_run_alone_the_time_panel_is_empty_and_the_legend_still_names_every_attention(
    tmp_path, drawn, monkeypatch
):
    legends, texts = [], []
    save = Context.save_figure

    def capture(self, fig, stem):
        legends.extend(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
        texts.extend(t.get_text() for t in fig.axes[1].texts)
        return save(self, fig, stem)

    monkeypatch.setattr(Context, "save_figure", capture)
    shared = {n: (b, k, s, [False] * 3) for n, (b, k, s, _) in SEEDS.items()}
    _, caption, _, time_ax = _render(tmp_path, drawn, shared)
    assert _points(time_ax) == {}
    assert "only from runs that ran alone (no run did: the time panel is empty)" in caption
    assert set(SEEDS) <= set(legends)
    assert texts == ["no run trained alone"]  # the empty panel says why


def test_the_papers_comparisons_are_arrows_from_baseline_to_proposal(tmp_path, drawn, monkeypatch):
    arrows = []
    annotate = matplotlib.axes.Axes.annotate

    def record(ax, text, xy, xytext=None, **kw):
        if kw.get("arrowprops"):
            panel = ax.get_subplotspec().colspan.start  # 0: FLOPs, 1: time
            arrows.append((panel, (float(xytext[0]), float(xytext[1])), (float(xy[0]), float(xy[1]))))
        return annotate(ax, text, xy, xytext, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "annotate", record)
    _, _, flops_ax, time_ax = _render(tmp_path, drawn)
    flops, timed = _points(flops_ax), _points(time_ax)
    on_flops = [(start, end) for panel, start, end in arrows if panel == 0]
    assert on_flops == [
        (pytest.approx(flops["window"]), pytest.approx(flops["adaptive"])),  # Figure 3: fixed span -> adaptive
        (pytest.approx(flops["dense"]), pytest.approx(flops["fixed"])),  # Table 2: dense -> fixed
    ]
    on_time = [(start, end) for panel, start, end in arrows if panel == 1]
    # dense has no time (no seed ran alone): Table 2's arrow is not drawn there
    assert on_time == [(pytest.approx(timed["window"]), pytest.approx(timed["adaptive"]))]


def test_the_table_gives_each_attention_its_spreads_and_whether_it_was_still_improving(tmp_path, drawn):
    table, caption, _, _ = _render(tmp_path, drawn)
    frame = pd.read_csv(table.with_suffix(".csv")).set_index("attention")
    bits = SEEDS["adaptive"][0]
    assert frame.loc["adaptive", "test bits"] == pytest.approx(np.mean(bits))
    assert frame.loc["adaptive", "test bits sd"] == pytest.approx(np.std(bits, ddof=1))
    flops = 1e5 + 2 * LAYERS * 2 * D * np.array(SEEDS["adaptive"][1])
    assert frame.loc["adaptive", "FLOPs per token sd"] == pytest.approx(flops.std(ddof=1))
    assert frame.loc["dense", "valid gain last fifth"] == pytest.approx(4.1 - 3.95)
    assert frame.loc["fixed", "valid gain last fifth"] == pytest.approx(4.10 - 4.09)
    assert frame["still improving"].to_dict() == {n: n == "dense" for n in SEEDS}
    md = table.read_text()
    assert "still improving" in md and "dense" in caption.split("Still improving")[1]


# a `repro bench frontier` record per attention: median, min and max seconds per step (dense among them,
# though none of its training seeds ran alone); one registered after these is the slowest
OWN_BENCH = {
    "dense": (0.050, 0.048, 0.055),
    "window": (0.031, 0.030, 0.033),
    "adaptive": (0.027, 0.026, 0.029),
    "dynamic": (0.044, 0.041, 0.047),
    "strided": (0.035, 0.034, 0.036),
    "fixed": (0.029, 0.028, 0.031),
    "longformer": (0.033, 0.032, 0.035),
}
BENCH = {name: OWN_BENCH.get(name, (0.060, 0.058, 0.062)) for name in ATTENTIONS}


def _bench_file(path, scale="tiny", measured="2026-12-05T10:00:00Z", scale_of=BENCH, idle=True):
    records = [
        {
            "attention": a,
            "manifest": "frontier",
            "scale": scale,
            "seconds_per_step": med,
            "seconds_per_step_min": lo,
            "seconds_per_step_max": hi,
            "rounds": 20,
            "warmup": 3,
            "threads": 2,
            "kernels": "native AVX512",
            "measured": measured,
            "idle": idle,
            "others_cores_during_max": 0.05,
        }
        for a, (med, lo, hi) in scale_of.items()
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records))


@pytest.fixture
def labels(monkeypatch):
    """The time panel's x labels of every figure saved while the test runs."""
    seen = []
    save = Context.save_figure

    def capture(self, fig, stem):
        seen.append(fig.axes[1].get_xlabel())
        return save(self, fig, stem)

    monkeypatch.setattr(Context, "save_figure", capture)
    return seen


def test_a_stored_bench_record_is_the_time_panel_with_min_max_bars_and_its_label(tmp_path, drawn, labels):
    bench = tmp_path / "bench"
    _bench_file(bench / "frontier.json")
    older = {a: (1.0, 0.9, 1.1) for a in BENCH}  # an earlier bench beside it, and another scale's: not drawn
    _bench_file(bench / "frontier.20261201T000000Z.json", measured="2026-12-01T00:00:00Z", scale_of=older)
    _bench_file(bench / "frontier.20261206T000000Z.json", scale="cpu", measured="2026-12-06T00:00:00Z", scale_of=older)
    table, caption, _, time_ax = _render(tmp_path, drawn)
    points = _points(time_ax)
    assert set(points) == set(SEEDS)  # every attention, dense too: no training seed needs to have run alone
    for name, (med, lo, hi) in BENCH.items():
        assert points[name] == pytest.approx((med, np.mean(SEEDS[name][0])))
        assert _bar_at(_bars(time_ax, False), points[name][1], lo, hi), name
    assert labels == ["seconds per step, idle interleaved bench (repro bench frontier)"]
    assert (
        "Seconds per step from `repro bench frontier` (2026-12-05T10:00:00Z): each attention's median over 20"
        in caption
    )
    assert "the machine idle throughout" in caption and "ran alone" not in caption
    frame = pd.read_csv(table.with_suffix(".csv")).set_index("attention")
    assert frame.loc["dense", "s/step (bench)"] == 0.050 and frame.loc["dense", "s/step bench max"] == 0.055
    timed = {n: (BENCH[n][0], y) for n, (_, y) in points.items()}
    assert set(frame.index[frame["on bits/time front"]]) == _front(timed)
    assert np.isnan(frame.loc["dense", "s/step (alone)"])  # the runs' own timing stays in the table


def test_a_bench_on_a_busy_machine_says_so_and_without_one_the_runs_alone_are_drawn(tmp_path, drawn, labels):
    _bench_file(tmp_path / "bench" / "frontier.json", scale="cpu")  # another scale's only: the fallback
    _, caption, _, time_ax = _render(tmp_path, drawn)
    assert "dense" not in _points(time_ax) and "Seconds per step only from runs that ran alone" in caption
    _bench_file(tmp_path / "bench" / "frontier.json", idle=False)
    _, caption, _, _ = _render(tmp_path, drawn)
    assert labels == [
        "seconds per training step (runs alone)",
        "seconds per step, interleaved bench (repro bench frontier; machine not idle)",
    ]
    assert "the machine NOT idle (other processes kept up to 0.05 cores busy)" in caption
