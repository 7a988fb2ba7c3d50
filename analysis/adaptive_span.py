"""Renderers of the Adaptive Span paper (Sukhbaatar et al. 2019): Tables 1-3, Figures 1-5, two ablations.

Every renderer reads only its context's tidy run table (summary keys and the resolved spec as dotted
columns, e.g. ``model.span.limit``), the runs' ``analysis.npz`` and the manifest's ``reference`` (the paper's numbers, copied into the manifest), and writes into
``results/reports/``: figures as PNG + PDF under ``figures/`` (title: the scale and the dataset), tables as
markdown + CSV under ``tables/`` with the paper's values beside ours. It returns the files with captions.

FLOPs. ``summary.flops_per_token`` counts 2 FLOPs per multiply-accumulate and the relative-position term
(``repro.models.flops``). The paper's tables count 1 per MAC and no position term; the tables and Figure 3 show
ours in the paper's convention, derived from the summary alone:
``(flops_per_token - 2 * sum(effective spans) * d_h) / 2``.

Figure 2 draws the mechanism's own soft mask (``repro.models.span.soft_mask``, the one the model trains
with); no renderer loads a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from repro.report.renderers import (
    Context,
    error_bars,
    finished_runs,
    legend,
    pyplot,
    renderer,
    spread,
    without_blank_spread,
)

Files = list[tuple[Path, str]]


# -- helpers -----------------------------------------------------------------------------------


def mask_curve(x: np.ndarray, z: float, ramp: float) -> np.ndarray:
    """The soft mask m_z at the distances ``x`` (``repro.models.span.soft_mask``), as numpy for plotting."""
    import torch  # here: `repro validate` loads every renderer file and needs no torch

    from repro.models.span import soft_mask

    return soft_mask(torch.as_tensor(x, dtype=torch.float64), z, ramp).numpy()


def paper_flops(run: pd.Series) -> float | None:
    """A run's FLOPs per token in the paper's table convention (1 per MAC, no position term): the
    position term's sum of effective spans is ``avg_span`` x layers x heads, so the result is linear in
    the summary's numbers and a cell's seed means give the mean of its seeds' values."""
    total, avg = run.get("flops_per_token"), run.get("avg_span")
    if total is None or avg is None or pd.isna(total) or pd.isna(avg):
        return None
    heads = run["model.heads"]
    spans = float(avg) * run["model.layers"] * heads
    return (float(total) - 2.0 * spans * (run["model.d_model"] / heads)) / 2.0


def _paper_rows(ctx: Context, key: str) -> list[dict[str, Any]]:
    return list(ctx.reference(key) or [])


def _label(row: pd.Series, keys: Iterable[str]) -> str:
    return " ".join(f"{str(k).rsplit('.', 1)[-1]}={row[k]}" for k in keys if k in row) or str(row["run_id"])


def _our_rows(ctx: Context, runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Our finished runs as table rows, in the paper's columns. A run of the authors' released weights
    (``weights_source``, scale ``pretrained``) is two rows, labelled as their weights, never our training:
    its bits by the official evaluation protocol and by the suite's own."""
    keys = list(ctx.manifest.grid_for(ctx.scale))
    out = []
    for _, row in runs.iterrows():
        common = {
            "layers": row["model.layers"],
            "S": row["model.span.limit"],
            "avg span": row.get("avg_span"),
            "params": row.get("params"),
            "FLOPs (paper conv.)": paper_flops(row),
        }
        where = f"scale {ctx.scale}, {row.get('dataset', '?')}"
        if not isinstance(row.get("weights_source"), str):
            out.append(
                {
                    "model": f"ours: {_label(row, keys)}",
                    **common,
                    "dev bits": row.get("valid_bits"),
                    "test bits": row.get("test_bits"),
                    "source": f"this repo, {where}",
                }
            )
            continue
        prefix = row.get("eval_prefix")
        part = f", first {int(prefix):,} tokens of each split only" if pd.notna(prefix) and prefix else ""
        weights = f"the authors' weights ({row.get('weights_file')}): {_label(row, keys)}"
        for protocol, suffix in (("official protocol", ""), ("the suite's protocol", "_suite")):
            out.append(
                {
                    "model": f"{weights}, {protocol}",
                    **common,
                    "dev bits": row.get(f"valid_bits{suffix}"),
                    "test bits": row.get(f"test_bits{suffix}"),
                    "source": f"released checkpoint scored by this repo's model and data, {where}{part}",
                }
            )
    return out


def _table_files(ctx: Context, stem: str, paper_key: str, what: str, paper_data: str) -> Files:
    """A paper table with our rows appended (paper rows first, as the paper prints them); its caption
    names the paper's dataset (``paper_data``) and ours apart."""
    rows = []
    for p in _paper_rows(ctx, paper_key):
        rows.append(
            {
                "model": p.get("model"),
                "layers": p.get("layers"),
                "S": p.get("S"),
                "avg span": p.get("avg_span"),
                "params": p.get("params"),
                "FLOPs (paper conv.)": p.get("flops"),
                "dev bits": p.get("dev_bpc"),
                "test bits": p.get("test_bpc"),
                "source": f"paper ({p.get('source', 'this paper')})",
            }
        )
    rows += _our_rows(ctx, finished_runs(ctx.runs))
    frame = pd.DataFrame(
        rows,
        columns=[
            "model",
            "layers",
            "S",
            "avg span",
            "params",
            "FLOPs (paper conv.)",
            "dev bits",
            "test bits",
            "source",
        ],
    )
    caption = (
        f"{what} — the paper's rows (on {paper_data}) beside ours ({ctx.label}). Scale {ctx.scale}: "
        f"our absolute numbers are not comparable to the paper's."
    )
    if ctx.scale == "pretrained":
        caption = (
            f"{what} — the paper's rows (on {paper_data}) beside the authors' released weights, imported into "
            f"this repo's model and scored on its data ({ctx.label}): their training, not ours; the official "
            "README says the released weights are reruns after a code cleanup, so small differences from the "
            "paper are expected (docs/pretrained.md)."
        )
    return [(ctx.write_table(stem, frame, caption), caption)]


# -- tables ------------------------------------------------------------------------------------


@renderer(
    "as-table1",
    reads=("valid_bits", "test_bits", "avg_span", "effective_spans", "params", "flops_per_token"),
    reference={"table1": list},
)
def table1(ctx: Context) -> Files:
    """Table 1 (text8): T12 / Adaptive-Span small / large, plus the paper's prior-work rows."""
    return _table_files(ctx, "table1", "table1", "Table 1: bits per character, spans, parameters, FLOPs", "text8")


@renderer(
    "as-table2",
    reads=("valid_bits", "test_bits", "avg_span", "effective_spans", "params", "flops_per_token"),
    reference={"table2": list},
)
def table2(ctx: Context) -> Files:
    """Table 2 (enwik8)."""
    return _table_files(ctx, "table2", "table2", "Table 2: bits per byte, spans, parameters, FLOPs", "enwik8")


@renderer(
    "as-table3",
    reads=("valid_bits", "test_bits", "avg_span", "effective_spans", "params", "flops_per_token"),
    reference={"table3": list},
)
def table3(ctx: Context) -> Files:
    """Table 3: static (adaptive) vs dynamic span at S = 1024."""
    return _table_files(ctx, "table3", "table3", "Table 3 (S=1024): adaptive vs dynamic span", "text8")


# -- figures -----------------------------------------------------------------------------------


@renderer("as-fig1", reads=("analysis.npz:attention_by_distance",))
def fig1(ctx: Context) -> Files:
    """Figure 1: attention weight by distance of two heads of a fixed-span model (one local, one long).

    The two heads are picked from every layer's heads by their mean attended distance
    sum_x x a(x) / sum_x a(x): the smallest (local) and the largest (long)."""
    files: Files = []
    plt = pyplot()
    for _, row in finished_runs(ctx.runs).iterrows():
        path = ctx.run_dir(row["run_id"]).path / "analysis.npz"
        if not path.exists():
            continue
        att = ctx.run_dir(row["run_id"]).arrays("analysis.npz")["attention_by_distance"]  # (L, H, S)
        L, H, S = att.shape
        x = np.arange(S)
        a = np.nan_to_num(att)
        mean_dist = (a * x).sum(-1) / np.maximum(a.sum(-1), 1e-12)
        local = np.unravel_index(np.argmin(mean_dist), mean_dist.shape)
        long = np.unravel_index(np.argmax(mean_dist), mean_dist.shape)
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=False)
        for ax, (layer, head), name in zip(axes, (local, long), ("local head", "long-range head")):
            ax.plot(x, att[layer, head], lw=1)
            ax.set_title(
                f"{name}: layer {layer + 1}, head {head + 1} (mean distance {mean_dist[layer, head]:.0f})", fontsize=8
            )
            ax.set_xlabel("distance t - r (tokens)")
            ax.set_ylabel("mean attention weight")
            ax.set_xlim(0, S)
        fig.suptitle(ctx.title(f"Figure 1: attention by distance, fixed span S={S}"), fontsize=9)
        out = ctx.save_figure(fig, f"fig1-{row['run_id']}")
        caption = (
            f"Figure 1 ({ctx.label}): mean attention weight against distance for two heads of the "
            f"fixed-span model (S={S}): the most local head (layer {local[0] + 1} head {local[1] + 1}, "
            f"mean distance {mean_dist[local]:.0f}) and the longest-range one (layer {long[0] + 1} head "
            f"{long[1] + 1}, mean distance {mean_dist[long]:.0f}). Paper: one head attends only to the "
            f"last few tokens, the other over the whole span."
        )
        files.append((out, caption))
    return files


@renderer("as-fig2", reads=("spans",), reference={"fig2": dict})
def fig2(ctx: Context) -> Files:
    """Figure 2: the soft mask m_z(x) (pure function), with the masks our stored runs learned if any."""
    plt = pyplot()
    ref = ctx.reference("fig2", {})
    z, R = float(ref.get("z", 64)), float(ref.get("ramp", 32))
    xmax = float(ref.get("x_max", z + 2 * R + 32))
    x = np.linspace(0, xmax, 1000)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    ax = axes[0]
    ax.plot(x, mask_curve(x, z, R), lw=2, color="k")
    ax.axvline(z, ls=":", color="gray")
    ax.axvline(z + R, ls=":", color="gray")
    ax.annotate("z", (z, 0.5), xytext=(4, 0), textcoords="offset points")
    ax.annotate("z + R", (z + R, 0.8), xytext=(4, 0), textcoords="offset points")
    ax.set_xlabel("distance x = t - r")
    ax.set_ylabel("m_z(x)")
    ax.set_title(f"the soft mask, z={z:g}, R={R:g} (formula, no training)", fontsize=8)
    ax = axes[1]
    learned = 0
    for _, row in finished_runs(ctx.runs).iterrows():
        spans = row.get("spans")
        if row["model.span.kind"] != "adaptive" or not isinstance(spans, list):
            continue
        S, r = float(row["model.span.limit"]), float(row["model.span.ramp"])
        zs = [zz for layer in spans for zz in layer]
        xs = np.linspace(0, min(S, max(zs) + 2 * r + 16), 1000)
        for i, layer in enumerate(spans):
            for j, zz in enumerate(layer):
                ax.plot(
                    xs,
                    mask_curve(xs, zz, r),
                    lw=1,
                    alpha=0.8,
                    color=plt.cm.viridis(i / max(1, len(spans) - 1)),
                    label=f"layer {i + 1}" if j == 0 else None,
                )
                learned += 1
        ax.set_title(f"masks learned by our heads (S={S:g}, R={r:g})", fontsize=8)
        break
    if learned:
        legend(ax, fontsize=6)
        ax.set_xlabel("distance x = t - r")
        ax.set_ylabel("m_z(x)")
    else:
        ax.axis("off")
        ax.text(0.5, 0.5, "no stored run", ha="center")
    fig.suptitle(ctx.title("Figure 2: the soft masking function m_z(x)"), fontsize=9)
    out = ctx.save_figure(fig, "fig2")
    caption = (
        f"Figure 2 ({ctx.label}): m_z(x) = min(max((R + z - x)/R, 0), 1): 1 up to distance z, a linear "
        f"ramp of width R, 0 beyond z + R (left, the model's own mask function)"
        + (f"; right: the {learned} masks our stored adaptive run learned." if learned else ".")
    )
    return [(out, caption)]


def _by_kind_limit(ctx: Context) -> pd.DataFrame:
    rows = []
    for _, row in finished_runs(ctx.runs).iterrows():
        rows.append(
            {
                "kind": row["model.span.kind"],
                "S": int(row["model.span.limit"]),
                "dev bits": row.get("valid_bits"),
                "dev bits sd": spread(row, "valid_bits"),
                "test bits": row.get("test_bits"),
                "test bits sd": spread(row, "test_bits"),
                "avg span": row.get("avg_span"),
                "avg span sd": spread(row, "avg_span"),
                "FLOPs (paper conv.)": paper_flops(row),
                "flops_per_token": row.get("flops_per_token"),
                "seconds_per_step": row.get("seconds_per_step"),
            }
        )
    columns = ["kind", "S", "dev bits", "dev bits sd", "test bits", "test bits sd", "avg span", "avg span sd"]
    columns += ["FLOPs (paper conv.)", "flops_per_token", "seconds_per_step"]
    return pd.DataFrame(rows, columns=columns).sort_values(["kind", "S"])


@renderer(
    "as-fig3",
    reads=("valid_bits", "test_bits", "avg_span", "effective_spans", "flops_per_token", "seconds_per_step"),
    reference={"fig3": dict},
)
def fig3(ctx: Context) -> Files:
    """Figure 3: dev bits, average span and FLOPs against S, fixed vs adaptive; paper's values dashed."""
    plt = pyplot()
    ours = _by_kind_limit(ctx)
    ref = ctx.reference("fig3", {})
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    panels = [
        ("dev bits", "dev_bits", f"dev {ctx.bits_per}"),  # the unit of the data trained on
        ("avg span", "avg_span", "average span (tokens)"),
        ("FLOPs (paper conv.)", "flops", "FLOPs per token (paper convention)"),
    ]
    colors = {"fixed": "C0", "adaptive": "C1"}
    for ax, (col, ref_key, ylabel) in zip(axes, panels):
        for kind, group in ours.groupby("kind"):
            ax.plot(group["S"], group[col], "o-", color=colors.get(kind, "C2"), label=f"ours: {kind}")
            error_bars(
                ax, group["S"], group[col], yerr=group.get(f"{col} sd"), color=colors.get(kind, "C2")
            )  # FLOPs: none
        twin = None
        for kind, values in (ref.get(ref_key) or {}).items():
            if not isinstance(values, dict):
                continue
            xs = sorted(int(k) for k in values)
            target = ax
            if ref_key == "dev_bits":  # the paper's bits are on another scale: a second axis
                twin = twin or ax.twinx()
                target = twin
            target.plot(
                xs,
                [values[k] if k in values else values[str(k)] for k in xs],
                "s--",
                color=colors.get(kind, "C2"),
                alpha=0.5,
                label=f"paper (~): {kind}",
            )
        if ref_key == "avg_span":
            xs = sorted(set(ours["S"]) | set(int(s) for s in ref.get("span_limits", [])))
            ax.plot(xs, xs, ":", color="gray", lw=1, label="S (fixed span = S)")
        ax.set_xscale("log", base=2)
        if ref_key in ("avg_span", "flops"):
            ax.set_yscale("log")
        ax.set_xlabel("maximum span S")
        ax.set_ylabel(ylabel)
        handles, labels = ax.get_legend_handles_labels()
        if twin is not None:
            twin.set_ylabel("paper dev bpc (~, read off the plot)", fontsize=7)
            h2, l2 = twin.get_legend_handles_labels()
            handles, labels = handles + h2, labels + l2
            twin.grid(False)
        # under the panel, where no point lies beneath it
        ax.legend(handles, labels, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    fig.suptitle(ctx.title("Figure 3: fixed vs adaptive span as S grows"), fontsize=9)
    out = ctx.save_figure(fig, "fig3")
    caption = (
        f"Figure 3 ({ctx.label}): dev bits, average span and FLOPs per token against the maximum span S, "
        f"fixed (blue) vs adaptive (orange), each point the mean of a cell's seeds (bars: ± their sd); dashed: "
        f"the paper's values read off its plot (approximate; text8, 12-layer model; its bits on the right-hand axis)."
    )
    table = ctx.write_table("fig3", without_blank_spread(ours), f"Figure 3 data ({ctx.label})")
    return [(out, caption), (table, f"Figure 3 data ({ctx.label})")]


def layer_halves(spans: list[list[float]]) -> tuple[float, float]:
    """Mean span of the lower and of the upper half of the layers (middle layer excluded when odd)."""
    L = len(spans)
    lower, upper = spans[: L // 2], spans[(L + 1) // 2 :]
    return float(np.mean(lower)), float(np.mean(upper))


@renderer("as-fig4", reads=("spans", "effective_spans"))
def fig4(ctx: Context) -> Files:
    """Figure 4: the adaptive span of every head, by layer (effective span min(S, z + R), log scale)."""
    plt = pyplot()
    files: Files = []
    for _, row in finished_runs(ctx.runs).iterrows():
        effs, zs = row.get("effective_spans"), row.get("spans")
        if not isinstance(effs, list) or not effs:
            continue
        S = int(row["model.span.limit"])  # a seed mean of one value: 4096.0
        fig, ax = plt.subplots(figsize=(6, 3.8))
        rng = np.random.default_rng(0)
        for i, layer in enumerate(effs):
            ax.scatter(
                np.full(len(layer), i + 1) + rng.uniform(-0.15, 0.15, len(layer)), layer, s=22, alpha=0.8, color="C1"
            )
        ax.set_yscale("log")
        ax.set_xlabel("layer")
        ax.set_ylabel("span min(S, z + R) (tokens)")
        ax.set_xticks(range(1, len(effs) + 1))
        if S:
            ax.axhline(S, ls=":", color="gray", lw=1)
        fig.suptitle(ctx.title(f"Figure 4: span of every head by layer (S={S})"), fontsize=9)
        out = ctx.save_figure(fig, f"fig4-{row['run_id']}")
        low, up = layer_halves(zs)
        per_layer = ", ".join(f"L{i + 1}: {np.mean(layer):.0f}" for i, layer in enumerate(zs))
        caption = (
            f"Figure 4 ({ctx.label}): span of each head by layer (S={S}), run {row['run_id']}. Mean z per layer: "
            f"{per_layer}; lower-half mean z {low:.1f}, upper-half {up:.1f} tokens. The paper's depth trend "
            "is judged over every seed by the manifest's claims (upper-layers-longer, upper-layers-far)."
        )
        files.append((out, caption))
    return files


@renderer("as-fig5", reads=("analysis.npz:dynamic_spans", "analysis.npz:dynamic_spans_text"))
def fig5(ctx: Context) -> Files:
    """Figure 5: the dynamic span (mean over layers and heads) at each character of the paper's phrase."""
    plt = pyplot()
    files: Files = []
    for _, row in finished_runs(ctx.runs).iterrows():
        path = ctx.run_dir(row["run_id"]).path / "analysis.npz"
        if not path.exists():
            continue
        arrays = ctx.run_dir(row["run_id"]).arrays("analysis.npz")
        if "dynamic_spans" not in arrays:
            continue
        spans, text = arrays["dynamic_spans"], [str(c) for c in arrays["dynamic_spans_text"]]
        fig, ax = plt.subplots(figsize=(10, 3.2))
        ax.bar(range(len(spans)), spans, color="C1")
        ax.set_xticks(range(len(spans)))
        ax.set_xticklabels(["␣" if c == " " else c for c in text], fontsize=8)
        ax.set_ylabel("average dynamic span z_t")
        fig.suptitle(ctx.title("Figure 5: dynamic span per character"), fontsize=9)
        out = ctx.save_figure(fig, f"fig5-{row['run_id']}")
        starts = [i for i in range(len(text)) if text[i] != " " and (i == 0 or text[i - 1] == " ")]
        inner = [i for i in range(len(text)) if text[i] != " " and i not in starts]
        s_mean, i_mean = float(np.mean(spans[starts])), float(np.mean(spans[inner]))
        caption = (
            f"Figure 5 ({ctx.label}): mean dynamic span over layers and heads at each character of "
            f"'{''.join(text)}' (read after a full span of the valid split). Word-initial characters: "
            f"{s_mean:.1f} tokens on average, other letters {i_mean:.1f}; the paper sees larger spans at "
            f"word starts — {'also' if s_mean > i_mean else 'not'} the case here."
        )
        files.append((out, caption))
    return files


# -- ablations ---------------------------------------------------------------------------------


@renderer(
    "as-ablate-ramp",
    reads=("valid_bits", "test_bits", "span_max", "avg_span", "effective_spans", "flops_per_token"),
    reference={"paper_ramp": int},
)
def ablate_ramp(ctx: Context) -> Files:
    """The ramp width R against dev bits and the longest learned span z (an ablation the paper did not run).
    The span drawn is ``span_max``, the longest head's z: the average span min(S, z + R) counts the ramp
    and grows with R by construction (docs/manifests.md), so it is tabled, not drawn against R."""
    plt = pyplot()
    rows = []
    for _, row in finished_runs(ctx.runs).iterrows():
        rows.append(
            {
                "R": int(row["model.span.ramp"]),
                "dev bits": row.get("valid_bits"),
                "dev bits sd": spread(row, "valid_bits"),
                "test bits": row.get("test_bits"),
                "test bits sd": spread(row, "test_bits"),
                "longest z": row.get("span_max"),
                "longest z sd": spread(row, "span_max"),
                "avg span": row.get("avg_span"),
                "avg span sd": spread(row, "avg_span"),
                "FLOPs (paper conv.)": paper_flops(row),
            }
        )
    columns = ["R", "dev bits", "dev bits sd", "test bits", "test bits sd", "longest z", "longest z sd"]
    columns += ["avg span", "avg span sd"]
    frame = pd.DataFrame(rows, columns=[*columns, "FLOPs (paper conv.)"]).sort_values("R")
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for ax, col, color in ((axes[0], "dev bits", "C0"), (axes[1], "longest z", "C1")):
        ax.plot(frame["R"], frame[col], "o-", color=color)
        error_bars(ax, frame["R"], frame[col], yerr=frame[f"{col} sd"], color=color)
    axes[0].set_ylabel("dev bits")
    axes[1].set_ylabel("longest learned span z (tokens)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ramp width R")
        ref_r = ctx.reference("paper_ramp", 32)
        ax.axvline(ref_r, ls=":", color="gray", lw=1)
    fig.suptitle(ctx.title("Ablation: the soft mask's ramp width R (paper: R = 32)"), fontsize=9)
    out = ctx.save_figure(fig, "ramp")
    caption = (
        f"Ablation of R ({ctx.label}): dev bits and the longest head's learned span z (span_max, which the "
        "claim compares) against the ramp width (seed means, bars: ± their sd); dotted: the paper's R. The "
        "average span z + R grows with R by construction: it is in the table, not drawn."
    )
    table = ctx.write_table(
        "ramp", without_blank_spread(frame), f"Ablation of R ({ctx.label}); the paper only used R = 32"
    )
    return [(out, caption), (table, f"Ablation of R, data ({ctx.label})")]


@renderer(
    "as-ablate-lambda",
    reads=("valid_bits", "test_bits", "avg_span", "effective_spans", "flops_per_token"),
    reference={"paper_lambda": str},
)
def ablate_lambda(ctx: Context) -> Files:
    """The span penalty lambda x S: the accuracy / average-span frontier (an ablation the paper did not run)."""
    plt = pyplot()
    rows = []
    for _, row in finished_runs(ctx.runs).iterrows():
        rows.append(
            {
                "lambda": float(row["model.span.loss_coef"]),
                "S": int(row["model.span.limit"]),
                "dev bits": row.get("valid_bits"),
                "dev bits sd": spread(row, "valid_bits"),
                "test bits": row.get("test_bits"),
                "test bits sd": spread(row, "test_bits"),
                "avg span": row.get("avg_span"),
                "avg span sd": spread(row, "avg_span"),
                "FLOPs (paper conv.)": paper_flops(row),
            }
        )
    columns = ["lambda", "S", "dev bits", "dev bits sd", "test bits", "test bits sd", "avg span", "avg span sd"]
    frame = pd.DataFrame(rows, columns=[*columns, "FLOPs (paper conv.)"]).sort_values(["S", "lambda"])
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (S, group) in enumerate(frame.groupby("S")):
        group = group.sort_values("avg span")
        ax.plot(group["avg span"], group["dev bits"], "o-", color=f"C{i}", label=f"S={S:g}")
        error_bars(
            ax,
            group["avg span"],
            group["dev bits"],
            yerr=group["dev bits sd"],
            xerr=group["avg span sd"],
            color=f"C{i}",
        )
        for _, g in group.iterrows():
            ax.annotate(
                f"λ={g['lambda']:.0e}",
                (g["avg span"], g["dev bits"]),
                fontsize=6,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.set_xlabel("average span (tokens)")
    ax.set_ylabel("dev bits")
    legend(ax, fontsize=7)
    fig.suptitle(ctx.title("Ablation: span penalty λ — accuracy vs average span"), fontsize=9)
    out = ctx.save_figure(fig, "lambda")
    paper_lambda = ctx.reference("paper_lambda")
    caption = (
        f"Ablation of λ ({ctx.label}): dev bits against average span for each λ and S (seed means, bars: ± sd)"
        + (f"; the paper used λ = {paper_lambda}." if paper_lambda else ".")
    )
    table = ctx.write_table("lambda", without_blank_spread(frame), f"Ablation of λ x S ({ctx.label})")
    return [(out, caption), (table, f"Ablation of λ x S, data ({ctx.label})")]
