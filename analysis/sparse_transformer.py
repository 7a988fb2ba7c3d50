"""Renderers of the Sparse Transformer paper (Child et al. 2019; arXiv 1904.10509).

Each renderer reads only its context's tidy run table (summary keys and the resolved spec as dotted
columns), the runs' files (metrics.csv, analysis.npz, samples/) and the manifest's ``reference`` section (the paper's numbers), and writes into results/reports/figures:
a PNG per artefact (returned, so the report embeds it) and, for tables, a markdown and a CSV file
beside it (named in the caption) with the paper's values beside ours, the scale and the datasets.

``st-fig3`` draws the attention patterns themselves: it imports :mod:`repro.models.patterns`, a pure
numpy module of pattern definitions (no torch, no model), which is the one exception to "renderers
never import models" and keeps the picture identical to what the kernels compute.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from repro.files import atomic
from repro.models import patterns as P
from repro.report.renderers import (
    Context,
    error_bars,
    error_extent,
    finished_runs,
    format_value,
    legend,
    mark_single_seeds,
    pyplot,
    renderer,
    spread,
    without_blank_spread,
)

# -- helpers -----------------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _bits_metric(runs: pd.DataFrame) -> str:
    """test_bits when every run has it, else valid_bits (tiny image runs score only the valid split)."""
    for metric in ("test_bits", "valid_bits"):
        if metric in runs and not runs.empty and runs[metric].notna().all():
            return metric
    return "test_bits"


def _short(key: str) -> str:
    return key.rsplit(".", 1)[-1]


# -- Table 1 -----------------------------------------------------------------------------------


@renderer("st-table1", reads=("valid_bits", "test_bits", "params"), reference={"dataset": str, "table1": list})
def table1(ctx: Context) -> list[tuple[Path, str]]:
    """Table 1 from the per-dataset manifests (st-table1's ``parts``): ours beside the paper's Sparse
    Transformer and the best baseline of each dataset. Called from a part (its own row, one scale) or
    from st-table1 (scale "none": every part at every stored scale)."""
    parts = ctx.parts or {ctx.manifest.name: (ctx.manifest, ctx.runs)}
    rows = []
    for name, (part, part_runs) in parts.items():
        paper_dataset = part.reference.get("dataset", name)
        listed = part.reference.get("table1") or []
        ours_paper = next((e for e in listed if "Sparse Transformer" in e.get("model", "")), {})
        baselines = [e for e in listed if "Sparse Transformer" not in e.get("model", "")]
        best = min(baselines, key=lambda e: e["bits"]) if baselines else None
        stored = finished_runs(part_runs)
        if ctx.scale != "none" and not stored.empty:
            stored = stored[stored["scale"] == ctx.scale]
        if stored.empty:
            rows.append(
                {
                    "paper dataset": paper_dataset,
                    "scale": "",
                    "our data": "",
                    "our model": "",
                    "params": None,
                    "our bits": None,
                    "our bits sd": None,
                    "split": "",
                    "paper bits": ours_paper.get("bits"),
                    "paper model": ours_paper.get("model", ""),
                    "best baseline (paper)": f"{best['model']} {best['bits']}" if best else "",
                    "manifest": name,
                }
            )
            continue
        for _, run in stored.iterrows():
            metric = _bits_metric(pd.DataFrame([run]))
            rows.append(
                {
                    "paper dataset": paper_dataset,
                    "scale": run["scale"],
                    "our data": run.get("dataset"),
                    "our model": f"{run['model.pattern']} {run['model.layers']}L d{run['model.d_model']} "
                    f"l={run['model.stride']}",
                    "params": int(run["params"]) if _num(run.get("params")) is not None else None,
                    "our bits": _num(run.get(metric)),
                    "our bits sd": spread(run, metric),
                    "split": metric.split("_")[0],
                    "paper bits": ours_paper.get("bits"),
                    "paper model": ours_paper.get("model", ""),
                    "best baseline (paper)": f"{best['model']} {best['bits']}" if best else "",
                    "manifest": name,
                }
            )
    frame = pd.DataFrame(rows)
    stem = "table1"
    label = ctx.label if ctx.scale != "none" else "scale: every stored scale | data: stand-ins named per row"
    md = ctx.write_table(
        stem,
        without_blank_spread(frame),
        "Table 1: density modelling (bits per byte / per dim)",
        label=label,
        notes=[
            "our bits come from the stand-in datasets at the stated scale; tiny-scale numbers are NOT comparable "
            "to the paper's (different data, models 1000x smaller, minutes of CPU training)",
            "split: test unless the run scored only valid (tiny image runs)",
        ],
    )
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    shown = frame.dropna(subset=["our bits"]) if "our bits" in frame else frame.iloc[0:0]
    labels = [f"{r['paper dataset']}\n({r['our data']}, {r['scale']})" for _, r in shown.iterrows()]
    x = np.arange(len(shown))
    ax.bar(x - 0.2, shown["our bits"].astype(float) if len(shown) else [], 0.4, label="ours")
    error_bars(ax, x - 0.2, shown["our bits"].astype(float), yerr=shown["our bits sd"].astype(float))
    ax.bar(x + 0.2, shown["paper bits"].astype(float) if len(shown) else [], 0.4, label="paper (its own data)")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("bits per byte / dim")
    legend(ax, fontsize=7)
    if ctx.scale != "none":
        ax.set_title(ctx.title("Table 1: ours vs the paper"), fontsize=9)
    else:  # every stored scale: the banner unless every row is the paper's
        banner = " — NOT the paper's numbers" if set(shown["scale"]) - {"paper"} else ""
        ax.set_title(f"Table 1: ours vs the paper\n{label}{banner}", fontsize=9)
    path = ctx.save_figure(fig, stem)
    caption = f"Table 1, ours (the mean of each cell's seeds, bars: ± their sd) beside the paper's Sparse Transformer ({label})"
    return [(md, "table"), (path, caption)]


# -- Table 2 -----------------------------------------------------------------------------------


@renderer("st-table2", reads=("valid_bits", "test_bits", "seconds_per_step", "params", "attn_keys_per_query"))
def table2(ctx: Context) -> list[tuple[Path, str]]:
    """Dense vs strided vs fixed: bits and seconds per step from the same runs, beside the paper's."""
    runs = finished_runs(ctx.runs)
    if runs.empty:
        return []
    metric = _bits_metric(runs)
    key = next(k for k in ctx.manifest.grid_for(ctx.scale) if _short(k) == "pattern")
    dense = runs[runs[key] == "dense"]
    dense_sps = _num(dense["seconds_per_step"].iloc[0]) if not dense.empty else None
    dense_rel = spread(dense.iloc[0], "seconds_per_step") / dense_sps if dense_sps else math.nan
    ref_dense = ctx.reference_for({key: "dense"}).get("seconds_per_step")
    rows = []
    for _, run in runs.iterrows():
        ref = ctx.reference_for({key: run[key]})
        sps = _num(run.get("seconds_per_step"))
        speedup = (dense_sps / sps) if dense_sps and sps else None
        # the ratio of the seed means; its sd propagated from both s/step sds (dense against itself: none)
        speedup_sd = (
            speedup * math.hypot(dense_rel, spread(run, "seconds_per_step") / sps)
            if speedup and run[key] != "dense"
            else math.nan
        )
        rows.append(
            {
                "pattern": run[key],
                "data": run.get("dataset"),
                f"our {metric}": _num(run.get(metric)),
                f"our {metric} sd": spread(run, metric),
                "our s/step": sps,
                "our s/step sd": spread(run, "seconds_per_step"),
                "our speed-up vs dense": speedup,
                "our speed-up sd": speedup_sd,
                "paper bits (test)": ref.get("test_bits"),
                "paper s/iter": ref.get("seconds_per_step"),
                "paper speed-up vs dense": (ref_dense / ref["seconds_per_step"])
                if ref_dense and ref.get("seconds_per_step")
                else None,
                "params": run.get("params"),
                "keys/query": _num(run.get("attn_keys_per_query")),
                "n": int(run.get("seeds", 1)),  # seeds averaged; a one-seed bar is marked n=1
            }
        )
    order = {"dense": 0, "strided": 1, "fixed": 2}
    frame = pd.DataFrame(rows).sort_values("pattern", key=lambda s: s.map(order))
    md = ctx.write_table(
        "table2",
        without_blank_spread(frame),
        f"{ctx.manifest.title}",
        [
            f"our bits: {metric} (the whole split); s/step: median wall time of a training step after warm-up, "
            "on the scale's hardware (tiny, cpu: 2 CPU cores; a run's ran_alone says whether it had them alone)",
            "with several seeds: their means, `sd` their standard deviation; the speed-up is the ratio of the "
            "mean s/step, its sd propagated from both s/step sds",
            "paper: 8 V100s, same batch size for every pattern",
        ],
    )
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    x = np.arange(len(frame))
    axes[0].bar(x - 0.2, frame[f"our {metric}"], 0.4, label=f"ours ({metric})")
    error_bars(axes[0], x - 0.2, frame[f"our {metric}"], yerr=frame[f"our {metric} sd"])
    mark_single_seeds(axes[0], x - 0.2, frame[f"our {metric}"].astype(float), frame["n"])
    axes[0].bar(x + 0.2, frame["paper bits (test)"].astype(float), 0.4, label="paper (test)")
    axes[0].set_xticks(x, frame["pattern"])
    axes[0].set_ylabel("bits")
    ours = error_extent(frame[f"our {metric}"], frame[f"our {metric} sd"])
    paper = frame["paper bits (test)"].astype(float)
    lo, hi = np.nanmin(np.r_[ours[0], paper]), np.nanmax(np.r_[ours[1], paper])
    axes[0].set_ylim(max(0.0, lo - 0.3), hi + 0.1 * max(0.1, hi - lo))  # room for the n=1 marks
    legend(axes[0], fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)  # under, off the bars
    axes[1].bar(x - 0.2, frame["our speed-up vs dense"].astype(float), 0.4, label="ours")
    error_bars(axes[1], x - 0.2, frame["our speed-up vs dense"].astype(float), yerr=frame["our speed-up sd"])
    axes[1].bar(x + 0.2, frame["paper speed-up vs dense"].astype(float), 0.4, label="paper")
    axes[1].axhline(1.0, color="k", lw=0.8)
    axes[1].set_xticks(x, frame["pattern"])
    axes[1].set_ylabel("training speed-up vs dense")
    legend(axes[1], fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    fig.suptitle(ctx.title(f"{ctx.manifest.name}: patterns, bits and speed"), fontsize=9)
    path = ctx.save_figure(fig, "table2")
    caption = f"Table 2 ({ctx.label}): bits and training speed-up per pattern (seed means, bars: ± sd)"
    return [(md, "table"), (path, caption)]


# -- Table 3 -----------------------------------------------------------------------------------


@renderer("st-table3", reads=("test_bits_ctx<N>",), reference={"table3": list})
def table3(ctx: Context) -> list[tuple[Path, str]]:
    """Bits against the minimum evaluation context: ONE trained model (per seed) whose test split was
    scored at each context of ``eval.context_sweep`` (summary ``test_bits_ctx<N>``), beside the paper's
    values; with several seeds, their mean and standard deviation at each context."""
    runs = finished_runs(ctx.runs)
    if runs.empty:
        return []
    run = runs.iloc[0]
    block = run["data.block"]
    sweep = sorted(
        (int(m.group(1)), v, spread(run, k))
        for k, v in run.items()
        if (m := re.fullmatch(r"test_bits_ctx(\d+)", k)) and _num(v) is not None
    )
    if not sweep:
        return []
    seeds = int(_num(run.get("seeds")) or 1)
    frame = pd.DataFrame(
        [
            {"min_context": c, "block": block, "fraction": c / block, "our test bits": bits}
            | ({"sd over seeds": sd} if seeds > 1 else {})
            for c, bits, sd in sweep
        ]
    )
    paper = pd.DataFrame(ctx.reference("table3") or [])
    who = f"one model (run {run['run_id']})" if seeds == 1 else f"one model per seed ({seeds} seeds: their mean)"
    notes = [
        f"{who}, its whole test split scored once per minimum context; every "
        "scored target has at least min_context tokens of context inside its window"
    ]
    if not paper.empty:
        notes.append(
            "paper (enwik8, block 12,288): "
            + ", ".join(f"{int(r.min_context)} ({r.min_context / 12288:.3f}) -> {r.bits}" for r in paper.itertuples())
        )
    md = ctx.write_table("table3", frame, ctx.manifest.title, notes)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    if seeds > 1:
        ax.errorbar(
            frame["fraction"],
            frame["our test bits"],
            yerr=frame["sd over seeds"],
            fmt="o-",
            capsize=3,
            label=f"ours (test bits, block {block}; mean \u00b1 sd of {seeds} seeds)",
        )
    else:
        ax.plot(frame["fraction"], frame["our test bits"], "o-", label=f"ours (test bits, block {block})")
    ax.set_xlabel("minimum context / block")
    ax.set_ylabel("our bits")
    handles, names = ax.get_legend_handles_labels()
    if not paper.empty:
        ax2 = ax.twinx()
        ax2.plot(paper["min_context"] / 12288, paper["bits"], "s--", color="C1", label="paper (enwik8, right axis)")
        ax2.set_ylabel("paper bits per byte")
        ax2.grid(False)
        more = ax2.get_legend_handles_labels()
        handles, names = handles + more[0], names + more[1]
    ax.legend(handles, names, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    ax.set_title(ctx.title("Table 3: bits vs minimum evaluation context"), fontsize=9)
    path = ctx.save_figure(fig, "table3")
    return [(md, "Table 3 table"), (path, f"Table 3 ({ctx.label}): bits against the minimum context at evaluation")]


# -- Table 4 -----------------------------------------------------------------------------------


def _seq_len(run: pd.Series) -> int:
    return int(_num(run.get("data.seq_len")) or run["data.block"])


@renderer(
    "st-table4",
    reads=("valid_bits", "test_bits", "peak_memory_bytes", "seconds_per_step", "params"),
    reference={"memory_budget_bytes": dict, "table4": list},
)
def table4(ctx: Context) -> list[tuple[Path, str]]:
    """Per sequence length: every width's peak memory and bits, and the widest model within the budget."""
    runs = finished_runs(ctx.runs)
    if runs.empty:
        return []
    budget = ctx.reference("memory_budget_bytes", {}).get(ctx.scale)
    rows = []
    for _, run in runs.iterrows():
        peak = _num(run.get("peak_memory_bytes"))
        rows.append(
            {
                "seq_len": _seq_len(run),
                "d_model": run["model.d_model"],
                "layers": run["model.layers"],
                "params": int(run["params"]),
                "peak memory (MiB)": peak / 2**20 if peak else None,
                "fits budget": bool(peak is not None and budget is not None and peak <= budget),
                "valid bits": _num(run.get("valid_bits")),
                "test bits": _num(run.get("test_bits")),
                "s/step": _num(run.get("seconds_per_step")),
            }
        )
    frame = pd.DataFrame(rows).sort_values(["seq_len", "params"])
    chosen = []
    for seq_len, group in frame.groupby("seq_len"):
        fit = group[group["fits budget"]]
        best = fit.iloc[-1] if not fit.empty else None
        chosen.append(
            {
                "seq_len": seq_len,
                "largest fitting d_model": best["d_model"] if best is not None else None,
                "largest fitting params": best["params"] if best is not None else None,
                "its valid bits": best["valid bits"] if best is not None else None,
                "its peak memory (MiB)": best["peak memory (MiB)"] if best is not None else None,
            }
        )
    chosen = pd.DataFrame(chosen)
    paper = pd.DataFrame(ctx.reference("table4") or [])
    shrinks = chosen["largest fitting d_model"].dropna()  # width: params also count position embeddings
    verdict = ctx.judge(
        "narrower-with-length",
        "the widest model that fits the memory budget narrows (or stays) as the length grows",
        len(shrinks) == len(chosen) and shrinks.is_monotonic_decreasing,
        "widest fitting d_model per length: "
        + ", ".join(f"{int(r['seq_len'])}: {format_value(r['largest fitting d_model'])}" for _, r in chosen.iterrows()),
    )
    md = ctx.write_table(
        "table4",
        frame,
        ctx.manifest.title,
        [
            f"budget at this scale: {budget / 2**20:,.0f} MiB" if budget else "no budget for this scale",
            "largest model within the budget per length: "
            + "; ".join(
                f"{int(r['seq_len'])}: d {format_value(r['largest fitting d_model'])}, {format_value(r['largest fitting params'])} params, valid bits "
                f"{format_value(r['its valid bits'])}"
                for _, r in chosen.iterrows()
            ),
            f"verdict ({ctx.scale}): {verdict}",
            "paper (16 GB V100, classical music): "
            + ", ".join(f"{int(r.seq_len)}: {r.params / 1e6:.0f}M params -> {r.bits}" for r in paper.itertuples()),
            "peak memory on CPU = the process's peak resident set (runtime and data included)",
        ],
    )
    largest = ctx.out_dir / "tables" / f"{ctx.manifest.name}-table4-largest-{ctx.scale}.csv"
    atomic.write_text(largest, chosen.to_csv(index=False))
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.6))
    for d, group in frame.groupby("d_model"):
        axes[0].plot(
            group["seq_len"],
            group["peak memory (MiB)"],
            "o-",
            label=f"d={d} ({format_value(group['params'].iloc[0])} params)",
        )
        axes[1].plot(group["seq_len"], group["valid bits"], "o-", label=f"d={d}")
    if budget:
        axes[0].axhline(budget / 2**20, color="r", ls="--", lw=1, label="budget")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length (samples)")
        legend(ax, fontsize=7)
    axes[0].set_ylabel("peak memory (MiB)")
    axes[1].set_ylabel("valid bits per sample")
    fig.suptitle(ctx.title("Table 4: length vs model size under a memory budget"), fontsize=9)
    path = ctx.save_figure(fig, "table4")
    return [
        (md, "table"),
        (path, f"Table 4 ({ctx.label}): peak memory and bits per length and width; {verdict}"),
        (largest, "the largest fitting model per length (csv)"),
    ]


# -- Figure 2 ----------------------------------------------------------------------------------


@renderer(
    "st-fig2",
    reads=("analysis.npz:attention_query", "analysis.npz:query_position", "analysis.npz:sequence"),
    reference={"figure2": str},
)  # the paper's caption
def fig2(ctx: Context) -> list[tuple[Path, str]]:
    """Attention of one query pixel in every layer and head of a dense image model, on the image grid."""
    out = []
    for _, run in finished_runs(ctx.runs).iterrows():
        rd = ctx.run_dir(run["run_id"])
        if not (rd.path / "analysis.npz").exists():
            continue
        arrays = rd.arrays("analysis.npz")
        att, query = arrays["attention_query"], int(arrays["query_position"])
        rows, cols, ch = (int(v) for v in arrays["shape"])
        if rows == 0:
            continue
        layers, heads, _ = att.shape
        image = arrays["sequence"][: rows * cols * ch].reshape(rows, cols, ch)
        qpix = query // ch
        plt = pyplot()
        fig, axes = plt.subplots(heads, layers + 1, figsize=(1.9 * (layers + 1), 2.0 * heads), squeeze=False)
        for h in range(heads):
            ax = axes[h, 0]
            shown = image[..., 0] if ch == 1 else image
            ax.imshow(shown, cmap="gray" if ch == 1 else None, vmin=0, vmax=255)
            ax.plot(qpix % cols, qpix // cols, "r+", ms=9, mew=2)
            ax.set_title("input (query +)" if h == 0 else "", fontsize=7)
            ax.axis("off")
            for layer in range(layers):
                w = np.zeros(rows * cols * ch)
                w[:query] = att[layer, h, 1 : query + 1]  # input j holds element j - 1
                grid = w.reshape(rows, cols, ch).sum(-1)
                ax = axes[h, layer + 1]
                ax.imshow(grid, cmap="magma", vmin=0)
                ax.plot(qpix % cols, qpix // cols, "c+", ms=7, mew=1.5)
                ax.set_title(f"layer {layer + 1}, head {h + 1}", fontsize=7)
                ax.axis("off")
        fig.suptitle(ctx.title("Figure 2: attention of one query pixel, dense model"), fontsize=9)
        path = ctx.save_figure(fig, f"fig2-{run['run_id']}")
        out.append(
            (
                path,
                f"Figure 2 ({ctx.label}): where the query pixel (row {qpix // cols}, column "
                f"{qpix % cols}) attends in each layer and head of the dense model, first valid image",
            )
        )
    return out


# -- Figure 3 ----------------------------------------------------------------------------------


@renderer("st-fig3", reads=(), reference={"figure3": str})  # the paper's caption
def fig3(ctx: Context) -> list[tuple[Path, str]]:
    """The patterns' halves, union and two-layer connectivity (n = 36, l = 6), as matrices and as the
    paper's 6 x 6 view of one output."""
    n, stride, c = 36, 6, 1
    panels = P.figure3(n=n, stride=stride, c=c)
    plt = pyplot()
    fig, axes = plt.subplots(3, 4, figsize=(9, 7))
    for r, (pattern, mats) in enumerate(panels.items()):
        names = [k for k in mats if k not in ("union", "connectivity")] + ["union", "connectivity"]
        for col in range(4):
            ax = axes[r, col]
            ax.axis("off")
            if col < len(names):
                name = names[col]
                ax.imshow(mats[name], cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
                ax.set_title(f"{pattern}: {name}", fontsize=8)
        axes[r, 0].axis("on")  # for its label only: no ticks, no grid over the matrices
        axes[r, 0].grid(False)
        axes[r, 0].set_xticks([])
        axes[r, 0].set_yticks([])
        axes[r, 0].set_ylabel("output i", fontsize=7)
    fig.suptitle(
        f"Figure 3: attention matrices (row = output, column = input), n={n}, l={stride}, c={c}\n{ctx.label}",
        fontsize=9,
    )
    path = ctx.save_figure(fig, "fig3-matrices")
    # the paper's top row: which inputs one output reaches, on a 6 x 6 grid
    fig, axes = plt.subplots(3, 4, figsize=(7, 5.5))
    side = int(math.isqrt(n))
    query = 4 * side + 3  # row 4, column 3: the halves of strided and fixed differ there
    for r, (pattern, mats) in enumerate(panels.items()):
        names = [k for k in mats if k not in ("union", "connectivity")] + ["union", "connectivity"]
        for col in range(4):
            ax = axes[r, col]
            ax.set_xticks([])
            ax.set_yticks([])
            if col >= len(names):
                ax.axis("off")
                continue
            grid = mats[names[col]][query].reshape(side, side).astype(float)
            grid[query // side, query % side] = 0.5  # the output itself
            ax.imshow(grid, cmap="Blues", vmin=0, vmax=1)
            ax.set_title(f"{pattern}: {names[col]}", fontsize=8)
    fig.suptitle(f"Figure 3 (6 x 6 view): inputs reaching output {query} (row 4, column 3)\n{ctx.label}", fontsize=9)
    path2 = ctx.save_figure(fig, "fig3-grid")
    valid = {p: bool(P.check_valid(p, n, stride, c, combine="interleaved")) for p in P.PATTERNS}
    detail = ", ".join(
        f"{p}: {'every earlier input reached in 2 layers' if ok else 'NOT fully connected'}" for p, ok in valid.items()
    )
    return [
        (path, f"Figure 3 ({ctx.label}): halves, union and two-layer connectivity; {detail}"),
        (
            path2,
            f"Figure 3, the paper's 6 x 6 view ({ctx.label}): inputs output {query} attends to "
            "(half-shaded: the output itself; later positions are never attended)",
        ),
    ]


# -- Figure 4 ----------------------------------------------------------------------------------


@renderer(
    "st-fig4", reads=("valid_bits", "peak_memory_bytes", "seconds_per_step", "params"), reference={"figure4": str}
)  # the paper's caption
def fig4(ctx: Context) -> list[tuple[Path, str]]:
    """Peak memory, seconds per step and bits with and without checkpointing."""
    runs = finished_runs(ctx.runs)
    if runs.empty:
        return []
    key = next(k for k in ctx.manifest.grid_for(ctx.scale) if _short(k) == "checkpointing")
    rows = [
        {
            "checkpointing": bool(run[key]),
            "data": run.get("dataset"),
            "peak memory (MiB)": _num(run.get("peak_memory_bytes")) / 2**20
            if _num(run.get("peak_memory_bytes"))
            else None,
            "s/step": _num(run.get("seconds_per_step")),
            "valid bits": _num(run.get("valid_bits")),
            "params": run.get("params"),
        }
        for _, run in runs.iterrows()
    ]
    frame = pd.DataFrame(rows).sort_values("checkpointing")
    md = ctx.write_table(
        "fig4",
        frame,
        ctx.manifest.title,
        [
            "peak memory: torch.cuda.max_memory_allocated on GPU; the process's peak resident set on CPU "
            "(each cell run in its own process)",
            "the paper gives no numbers for this figure (a diagram)",
        ],
    )
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.2))
    labels = ["off" if not v else "on" for v in frame["checkpointing"]]
    axes[0].bar(labels, frame["peak memory (MiB)"])
    axes[0].set_ylabel("peak memory (MiB)")
    axes[0].set_xlabel("checkpointing")
    axes[1].bar(labels, frame["s/step"], color="C1")
    axes[1].set_ylabel("seconds per step")
    axes[1].set_xlabel("checkpointing")
    fig.suptitle(ctx.title("Figure 4: gradient checkpointing, memory and time"), fontsize=9)
    path = ctx.save_figure(fig, "fig4")
    return [(md, "table"), (path, f"Figure 4 ({ctx.label}): peak memory and step time with/without checkpointing")]


# -- Figure 5 ----------------------------------------------------------------------------------


@renderer("st-fig5", reads=("samples/",), reference={"figure5": str})  # the paper's caption
def fig5(ctx: Context) -> list[tuple[Path, str]]:
    """The newest sample grid under each run's samples/ (written by ``repro sample``), titled with the run,
    the sampling temperature and the scale and data."""
    out = []
    for _, run in finished_runs(ctx.runs).iterrows():
        rd = ctx.run_dir(run["run_id"])
        found = sorted((rd.path / "samples").glob("*.png"), key=lambda p: p.stat().st_mtime)
        if not found:
            continue
        temperature = re.search(r"-temp([0-9.]+)$", found[-1].stem)
        drawn = (
            f"temperature {temperature.group(1)}"
            if temperature
            else f"drawn before the temperature was recorded (`repro sample {run['run_id']}` draws one at 1.0)"
        )
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5, 5.4))
        ax.imshow(plt.imread(found[-1]))
        ax.axis("off")
        ax.set_title(
            f"Figure 5: unconditional samples, {drawn}\nrun {run['run_id']} (samples/{found[-1].name})\n{ctx.label}",
            fontsize=8,
        )
        dest = ctx.save_figure(fig, f"fig5-{run['run_id']}")
        out.append((dest, f"Figure 5 ({ctx.label}): unconditional samples, {drawn}, from run {run['run_id']}"))
    return out


# -- ablations ---------------------------------------------------------------------------------


@renderer(
    "st-ablation",
    reads=("valid_bits", "test_bits", "seconds_per_step", "params", "attn_keys_per_query"),
    reference={"ablation_key": str, "rule": str},
)
def ablation(ctx: Context) -> list[tuple[Path, str]]:
    """One grid axis (reference.ablation_key) against bits and seconds per step."""
    runs = finished_runs(ctx.runs)
    if runs.empty:
        return []
    key = ctx.reference("ablation_key") or next(iter(ctx.manifest.grid_for(ctx.scale)))
    metric = _bits_metric(runs)
    rows = []
    for _, run in runs.iterrows():
        ref = ctx.reference_for({key: run[key]})
        rows.append(
            {
                _short(key): run[key],
                "data": run.get("dataset"),
                f"our {metric}": _num(run.get(metric)),
                f"our {metric} sd": spread(run, metric),
                "our s/step": _num(run.get("seconds_per_step")),
                "our s/step sd": spread(run, "seconds_per_step"),
                "keys/query": _num(run.get("attn_keys_per_query")),
                "params": run.get("params"),
                "paper": ref.get("label", ""),
                "paper bits": ref.get("test_bits"),
                "n": int(run.get("seeds", 1)),  # seeds averaged; a one-seed bar is marked n=1
            }
        )
    frame = pd.DataFrame(rows)
    values = ctx.manifest.grid_for(ctx.scale).get(key, [])
    frame["_order"] = frame[_short(key)].map({v: i for i, v in enumerate(values)})
    frame = frame.sort_values("_order").drop(columns="_order")
    rule = ctx.reference("rule")
    md = ctx.write_table(
        "ablation",
        without_blank_spread(frame),
        ctx.manifest.title,
        [f"our bits: {metric}", "an ablation the paper did not run: no paper values"]
        + ([f"paper's rule: {rule}"] if rule else []),
    )
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    labels = [str(v) for v in frame[_short(key)]]
    axes[0].bar(labels, frame[f"our {metric}"])
    error_bars(axes[0], labels, frame[f"our {metric}"], yerr=frame[f"our {metric} sd"])
    mark_single_seeds(axes[0], labels, frame[f"our {metric}"].astype(float), frame["n"])
    lo, hi = error_extent(frame[f"our {metric}"], frame[f"our {metric} sd"])  # every error bar inside
    axes[0].set_ylim(lo - max(0.05, hi - lo), hi + 0.5 * max(0.05, hi - lo))
    axes[0].set_ylabel(f"{metric.split('_')[0]} bits (seed mean)")
    axes[0].set_xlabel(_short(key))
    axes[1].bar(labels, frame["our s/step"], color="C1")
    error_bars(axes[1], labels, frame["our s/step"], yerr=frame["our s/step sd"])
    axes[1].set_ylabel("seconds per step")
    axes[1].set_xlabel(_short(key))
    fig.suptitle(ctx.title(f"{ctx.manifest.name}: {_short(key)} against bits and step time"), fontsize=9)
    path = ctx.save_figure(fig, "ablation")
    return [(md, "table"), (path, f"Ablation of {_short(key)} ({ctx.label}): seed means, bars: ± sd")]
