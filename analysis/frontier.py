"""The frontier study's figure and table (experiments/suite/frontier.yaml, docs/frontier.md): test bits of
every attention on one backbone against its attention FLOPs per token and its measured seconds per step,
seed spreads drawn, the Pareto front marked, and the papers' own comparisons where they sit on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from repro.report.renderers import Context, error_bars, finished_runs, format_value, legend, pyplot, renderer, spread

# the papers' comparisons, drawn as arrows from their baseline to their proposal
PAPERS = (("window", "adaptive", "Fig. 3: fixed span -> adaptive"), ("dense", "fixed", "Table 2: dense -> fixed"))


def attention_flops(row: pd.Series) -> float:
    """Forward attention FLOPs per token: q.k and a.v over the keys each query attends, every layer (2 per MAC)."""
    return 2.0 * row["model.layers"] * row["attn_keys_per_query"] * 2 * row["model.d_model"]


def front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which points no other point beats on both (lower x and lower y): the Pareto front."""
    return np.array([not np.any((x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i]))) for i in range(len(x))])


def _seconds(ctx: Context, variant: str) -> tuple[float, float, int]:
    """Mean and sd of seconds per step over the seeds of ``variant`` that ran alone, and how many."""
    seeds = ctx.replicates if ctx.replicates is not None else ctx.runs
    rows = finished_runs(seeds)
    rows = rows[(rows["variant"] == variant) & (rows.get("ran_alone", pd.Series(False, index=rows.index)) == True)]  # noqa: E712
    values = pd.to_numeric(rows.get("seconds_per_step", pd.Series(dtype=float)), errors="coerce").dropna()
    return (
        float(values.mean()) if len(values) else np.nan,
        float(values.std(ddof=1)) if len(values) > 1 else np.nan,
        len(values),
    )


@renderer("frontier", reads=("test_bits", "attn_keys_per_query", "seconds_per_step", "ran_alone"))
def frontier(ctx: Context) -> list[tuple[Path, str]]:
    """The frontier: bits against attention FLOPs and against time, with the front and the papers' arrows."""
    runs = finished_runs(ctx.runs)
    if runs.empty or "test_bits" not in runs:
        return []
    frame = pd.DataFrame(
        [
            {
                "attention": r["variant"],
                "test bits": r["test_bits"],
                "test bits sd": spread(r, "test_bits"),
                "keys per query": r["attn_keys_per_query"],
                "attention FLOPs per token": attention_flops(r),
                "FLOPs per token": r["flops_per_token"],
                **dict(zip(("s/step (alone)", "s/step sd", "timed seeds"), _seconds(ctx, r["variant"]))),
                "seeds": int(r.get("seeds", 1)),
            }
            for _, r in runs.iterrows()
        ]
    )
    frame["on bits/FLOPs front"] = front(frame["attention FLOPs per token"].to_numpy(), frame["test bits"].to_numpy())
    timed = frame["s/step (alone)"].notna()
    frame["on bits/time front"] = False
    if timed.any():
        frame.loc[timed, "on bits/time front"] = front(
            frame.loc[timed, "s/step (alone)"].to_numpy(), frame.loc[timed, "test bits"].to_numpy()
        )
    md = ctx.write_table(
        "frontier",
        frame,
        ctx.manifest.title,
        [
            "attention FLOPs per token = 2 x layers x keys per query x 2 d (q.k and a.v); FLOPs per token adds the "
            "backbone's, the same for every attention",
            "s/step: the mean over the seeds that trained alone (blank: none did)",
            "front: no other attention has both fewer FLOPs (less time) and lower test bits",
        ],
    )
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, x, xerr, name in (
        (axes[0], frame["attention FLOPs per token"], None, "attention FLOPs per token (forward)"),
        (axes[1], frame["s/step (alone)"], frame["s/step sd"], "seconds per training step (runs alone)"),
    ):
        shown = x.notna()
        for i, row in frame[shown].iterrows():
            ax.plot(x[i], row["test bits"], "o", color=f"C{i % 10}", label=row["attention"])
        error_bars(
            ax,
            x[shown],
            frame.loc[shown, "test bits"],
            frame.loc[shown, "test bits sd"],
            xerr=None if xerr is None else xerr[shown],
        )
        on = frame[shown & front(x.fillna(np.inf).to_numpy(), frame["test bits"].to_numpy())]
        order = x[on.index].sort_values().index
        ax.step(x[order], frame.loc[order, "test bits"], where="post", color="0.4", ls="--", lw=1, label="Pareto front")
        for base, proposal, label in PAPERS:
            ends = frame.index[frame["attention"].isin([base, proposal])]
            if len(ends) == 2 and x[ends].notna().all():
                (b,), (p,) = (frame.index[frame["attention"] == n] for n in (base, proposal))
                ax.annotate(
                    "",
                    (x[p], frame.loc[p, "test bits"]),
                    (x[b], frame.loc[b, "test bits"]),
                    arrowprops={"arrowstyle": "->", "color": "0.3", "lw": 0.8},
                )
                ax.annotate(
                    label,
                    ((x[p] + x[b]) / 2, (frame.loc[p, "test bits"] + frame.loc[b, "test bits"]) / 2),
                    fontsize=7,
                    color="0.3",
                )
        ax.set_xscale("log")
        ax.set_xlabel(name)
    axes[0].set_ylabel("test bits per byte")
    legend(axes[1], fontsize=7, loc="upper right")
    fig.suptitle(
        f"Frontier: seven attentions, one backbone (bars: ± sd over seeds)\n{ctx.label} — neither paper's numbers",
        fontsize=9,
    )
    path = ctx.save_figure(fig, "frontier")
    caption = (
        f"Frontier ({ctx.label}): test bits against attention FLOPs per token and seconds per step; dashed: the "
        "Pareto front; arrows: the papers' own comparisons. On the bits/FLOPs front: "
        + ", ".join(frame.loc[frame["on bits/FLOPs front"], "attention"])
        + ". Test bits: "
        + ", ".join(f"{a} {format_value(b)}" for a, b in zip(frame["attention"], frame["test bits"]))
    )
    return [(md, "table"), (path, caption)]
