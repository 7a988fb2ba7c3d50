"""The frontier study's figure and table (experiments/suite/frontier.yaml, docs/frontier.md): test bits of
every attention on one backbone against its attention FLOPs per token and its measured seconds per step,
seed spreads drawn, the Pareto front marked, and the papers' own comparisons where they sit on it.

Seconds per step: the scale's newest stored ``repro bench frontier`` record (every attention stepped
interleaved on one machine, its load recorded: repro/bench/frontier.py) where one exists, else the training
runs' own, from the seeds that trained alone."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from repro.report import derived
from repro.report.renderers import Context, error_bars, finished_runs, format_value, pyplot, renderer, spread
from repro.store.runs import CorruptFile

# the papers' comparisons, drawn as arrows from their baseline to their proposal
PAPERS = (("window", "adaptive", "Fig. 3: fixed span -> adaptive"), ("dense", "fixed", "Table 2: dense -> fixed"))
# bits: an attention whose quick validation still gained this much over the last fifth of its steps had not
# learned what it can (the frontier manifest's precondition of dense-matches-fixed, docs/frontier.md)
FLAT = 0.02
FLOPS_AXIS, TIME_AXIS = "attention FLOPs per token (forward)", "seconds per training step (runs alone)"
BENCH_AXIS = "seconds per step, idle interleaved bench (repro bench frontier)"
LOADED_BENCH_AXIS = "seconds per step, interleaved bench (repro bench frontier; machine not idle)"
# `repro bench frontier`'s record files under <results>/bench/: the default one and those stored beside it
BENCH_FILE = re.compile(r"frontier(\.\d{8}T\d{6}Z)?\.json")


def stored_bench(root: Path, scale: str) -> list[dict] | None:
    """The newest stored ``repro bench frontier`` timings of ``scale`` (by their ``measured`` time): one
    file's records of the frontier at that scale, those with a time; None when no file has any."""
    best: list[dict] | None = None
    folder = Path(root) / "bench"
    for path in sorted(folder.glob("frontier*.json")) if folder.is_dir() else []:
        if not BENCH_FILE.fullmatch(path.name):
            continue
        try:
            records = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise CorruptFile(f"{path}: corrupt ({type(err).__name__}: {err})") from None
        if not isinstance(records, list):
            raise CorruptFile(f"{path}: corrupt (expected a list of records)")
        mine = [
            r
            for r in records
            if isinstance(r, dict)
            and r.get("manifest") == "frontier"
            and r.get("scale") == scale
            and "error" not in r
            and isinstance(r.get("seconds_per_step"), (int, float))
        ]
        if mine and (best is None or str(mine[0].get("measured", "")) > str(best[0].get("measured", ""))):
            best = mine
    return best


def _bench_columns(frame: pd.DataFrame, bench: list[dict]) -> pd.DataFrame:
    """``frame`` with each attention's bench median, min and max seconds per step (NaN: not benched)."""
    by = {r["attention"]: r for r in bench}
    out = frame.copy()
    for column, key in (
        ("s/step (bench)", "seconds_per_step"),
        ("s/step bench min", "seconds_per_step_min"),
        ("s/step bench max", "seconds_per_step_max"),
    ):
        out[column] = [float(by[a].get(key, np.nan)) if a in by else np.nan for a in out["attention"]]
    return out


def _bench_note(frame: pd.DataFrame, bench: list[dict]) -> str:
    """Where the time panel's seconds come from: the bench's run, its rounds, the machine's load."""
    first = bench[0]
    others = first.get("others_cores_during_max")
    if first.get("idle") is True:
        load = f"the machine idle throughout (other processes at most {format_value(others)} cores)"
    elif first.get("idle") is False:
        load = f"the machine NOT idle (other processes kept up to {format_value(others)} cores busy)"
    else:
        load = "the machine's load not recorded"
    missing = [a for a in frame["attention"] if a not in {r["attention"] for r in bench}]
    return (
        f"Seconds per step from `repro bench frontier` ({first.get('measured', 'undated')}): each attention's "
        f"median over {first.get('rounds')} interleaved rounds after {first.get('warmup')} warm-up rounds, bars "
        f"from min to max, {load}; {first.get('threads')} threads, {first.get('kernels') or first.get('device')}; "
        "the adaptive and dynamic spans at a stored run's final spans (dynamic's z_t at its head means for "
        "every token: a lower bound of its trained step)" + (f"; not benched: {', '.join(missing)}" if missing else "")
    )


def flops_per_key(row: pd.Series) -> float:
    """Forward attention FLOPs per key a query attends: q.k and a.v, every layer (2 per MAC); times the keys
    per query, the attention FLOPs per token."""
    return 2.0 * row["model.layers"] * 2 * row["model.d_model"]


def front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which points no other point beats on both (lower x and lower y): the Pareto front."""
    return np.array([not np.any((x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i]))) for i in range(len(x))])


def _per_seed(ctx: Context) -> pd.DataFrame:
    """Every finished seed's run (the context's replicates, or its one run per cell), with the quick
    validation's gain over the last fifth of the steps read from its curve (repro.report.derived)."""
    rows = finished_runs(ctx.replicates if ctx.replicates is not None else ctx.runs)
    return derived.add(rows, ctx.root, ctx.manifest.name, {"valid_gain_last_fifth"})


def _timing(seeds: pd.DataFrame) -> dict[str, float]:
    """Seconds per step of the seeds that ran alone (mean, sd, how many), and of how many seeds."""
    alone = seeds["ran_alone"].astype(object).eq(True) if "ran_alone" in seeds else pd.Series(False, seeds.index)
    values = pd.to_numeric(seeds.loc[alone, "seconds_per_step"], errors="coerce").dropna()
    return {
        "s/step (alone)": float(values.mean()) if len(values) else np.nan,
        "s/step sd": float(values.std(ddof=1)) if len(values) > 1 else np.nan,
        "timed seeds": len(values),
    }


def _row(r: pd.Series, seeds: pd.DataFrame) -> dict:
    """The table's row of one attention: seed means and sds (``r``, a row of the seed means), its timing
    and its gain over the last fifth from its seeds' runs (``seeds``)."""
    per_key = flops_per_key(r)
    gain = float(seeds["valid_gain_last_fifth"].mean()) if len(seeds) else np.nan
    return {
        "attention": r["variant"],
        "seeds": int(r.get("seeds", 1)),
        "test bits": r["test_bits"],
        "test bits sd": spread(r, "test_bits"),
        "keys per query": r["attn_keys_per_query"],
        "attention FLOPs per token": per_key * r["attn_keys_per_query"],
        "attention FLOPs per token sd": per_key * spread(r, "attn_keys_per_query"),
        "FLOPs per token": r.get("flops_per_token", np.nan),
        "FLOPs per token sd": spread(r, "flops_per_token"),
        **_timing(seeds),
        "valid gain last fifth": gain,
        "still improving": bool(gain >= FLAT) if np.isfinite(gain) else None,
    }


def _time_note(frame: pd.DataFrame) -> str:
    """Which attentions' runs the time panel leaves out (those that shared the machine)."""
    if not frame["timed seeds"].any():
        return "no run did: the time panel is empty"
    short = frame[frame["timed seeds"] < frame["seeds"]]
    if short.empty:
        return "every run did"
    left = [
        f"{a} ({t} of {n}{' seeds ran alone' if i == 0 else ''})"
        for i, (a, t, n) in enumerate(zip(short["attention"], short["timed seeds"], short["seeds"]))
    ]
    return "left out, having shared the machine: " + ", ".join(left)


@renderer(
    "frontier",
    reads=(
        "test_bits",
        "attn_keys_per_query",
        "flops_per_token",
        "seconds_per_step",
        "ran_alone",
        "metrics.csv:valid/bits_quick",
    ),
)
def frontier(ctx: Context) -> list[tuple[Path, str]]:
    """The frontier: bits against attention FLOPs and against time, with the front and the papers' arrows."""
    runs = finished_runs(ctx.runs)
    if runs.empty or "test_bits" not in runs:
        return []
    seeds = _per_seed(ctx)
    frame = pd.DataFrame([_row(r, seeds[seeds["variant"] == r["variant"]]) for _, r in runs.iterrows()])
    frame["on bits/FLOPs front"] = front(frame["attention FLOPs per token"].to_numpy(), frame["test bits"].to_numpy())
    bench = stored_bench(ctx.root, ctx.scale)  # idle interleaved timings, where stored; else the runs alone
    if bench:
        frame = _bench_columns(frame, bench)
        seconds = "s/step (bench)"
        time_err = pd.DataFrame(
            {"below": frame[seconds] - frame["s/step bench min"], "above": frame["s/step bench max"] - frame[seconds]}
        )
        time_axis = BENCH_AXIS if bench[0].get("idle") is True else LOADED_BENCH_AXIS
        time_note, empty = _bench_note(frame, bench), "no attention benched"
    else:
        seconds, time_err, time_axis = "s/step (alone)", frame["s/step sd"], TIME_AXIS
        time_note = f"Seconds per step only from runs that ran alone ({_time_note(frame)})"
        empty = "no run trained alone"
    timed = frame[seconds].notna()
    frame["on bits/time front"] = False
    if timed.any():
        frame.loc[timed, "on bits/time front"] = front(
            frame.loc[timed, seconds].to_numpy(), frame.loc[timed, "test bits"].to_numpy()
        )
    improving = frame.loc[frame["still improving"].eq(True), "attention"]
    md = ctx.write_table(
        "frontier",
        frame,
        ctx.manifest.title,
        [
            "each value the mean over the attention's seeds, `sd` their standard deviation (blank: one seed)",
            "attention FLOPs per token = 2 x layers x keys per query x 2 d (q.k and a.v); FLOPs per token adds the "
            "backbone's, the same for every attention",
            "s/step: the mean over the seeds that trained alone (timed seeds; blank: none did)",
            *(
                [
                    "s/step (bench): the median step of `repro bench frontier` (interleaved rounds; min and max "
                    "beside it), which the time panel and its front use"
                ]
                if bench
                else []
            ),
            "front: no other attention has both fewer FLOPs (less time) and lower test bits",
            f"valid gain last fifth: the quick validation's improvement over the last fifth of the steps (seed "
            f"mean); still improving: at least {FLAT} bits, so its comparisons say as much about the budget as "
            "about the attention",
        ],
    )
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, x, xerr, name, nothing in (
        (axes[0], frame["attention FLOPs per token"], frame["attention FLOPs per token sd"], FLOPS_AXIS, ""),
        (axes[1], frame[seconds], time_err, time_axis, empty),
    ):
        _panel(ax, frame, x, xerr, nothing)
        ax.set_xlabel(name)
    axes[0].set_ylabel("test bits per byte")
    axes[1].legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="best")  # clear of the points
    fig.suptitle(
        "Frontier: seven attentions, one backbone (bars: ± sd over seeds"
        + ("; seconds: the bench's min to max" if bench else "")
        + f")\n{ctx.label} — neither paper's numbers",
        fontsize=9,
    )
    path = ctx.save_figure(fig, "frontier")
    caption = (
        f"Frontier ({ctx.label}): test bits against attention FLOPs per token and seconds per step (seed means, "
        "bars: ± sd over seeds); dashed: the Pareto front; arrows: the papers' own comparisons. "
        f"{time_note}. On the bits/FLOPs front: "
        + ", ".join(frame.loc[frame["on bits/FLOPs front"], "attention"])
        + ". Still improving (the last fifth's gain at least "
        + f"{FLAT} bits): {', '.join(improving) if len(improving) else 'none'}. Test bits: "
        + ", ".join(f"{a} {format_value(b)}" for a, b in zip(frame["attention"], frame["test bits"]))
    )
    return [(md, "table"), (path, caption)]


def _panel(ax, frame: pd.DataFrame, x: pd.Series, xerr: pd.Series | pd.DataFrame, empty: str) -> None:
    """One panel: each attention's point (seed means, bars: their sds, or for ``xerr`` with two columns the
    distances below and above ``x``), the Pareto front as a staircase and the papers' comparisons as arrows
    from baseline to proposal, over the attentions with an ``x`` (none: the panel says ``empty``)."""
    shown = x.notna()
    if not shown.any():
        ax.text(0.5, 0.5, empty, transform=ax.transAxes, ha="center", color="0.4")
    for i, row in frame[shown].iterrows():
        ax.plot(x[i], row["test bits"], "o", color=f"C{i % 10}", label=row["attention"])
    bars = xerr[shown].to_numpy().T if isinstance(xerr, pd.DataFrame) else xerr[shown]
    error_bars(ax, x[shown], frame.loc[shown, "test bits"], frame.loc[shown, "test bits sd"], xerr=bars)
    on = frame[shown & front(x.fillna(np.inf).to_numpy(), frame["test bits"].to_numpy())]
    order = x[on.index].sort_values().index
    ax.step(x[order], frame.loc[order, "test bits"], where="post", color="0.4", ls="--", lw=1, label="Pareto front")
    for base, proposal, label in PAPERS:
        ends = [frame.index[frame["attention"] == n] for n in (base, proposal)]
        if all(len(e) == 1 for e in ends) and x[[e[0] for e in ends]].notna().all():
            (b,), (p,) = ends
            y = frame["test bits"]
            ax.annotate("", (x[p], y[p]), (x[b], y[b]), arrowprops={"arrowstyle": "->", "color": "0.3", "lw": 0.8})
            ax.annotate(label, (np.sqrt(x[p] * x[b]), (y[p] + y[b]) / 2), fontsize=7, color="0.3")  # log x: mid
    ax.set_xscale("log")
    # a few plain labels: a narrow range (the time panel) has no decade for log labels, and its minor ones overlap
    from matplotlib import ticker  # loaded by then: pyplot() imported matplotlib

    ax.xaxis.set_major_locator(ticker.MaxNLocator(5))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
