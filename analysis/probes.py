"""Renderers of the `probe` scale's synthetic mechanism checks (docs/probes.md): bits per dependency class
beside their known floor and blind levels, and the adaptive span's gradient horizon. Never the papers'
numbers: the corpora are generated (repro.data.synthetic)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from repro.config.cells import cell_text
from repro.report.renderers import Context, error_bars, legend, pyplot, renderer, spread

Files = list[tuple[Path, str]]


def classes(runs: pd.DataFrame) -> list[str]:
    """The dependency classes the runs scored on their valid split (columns ``valid_bits.<class>``)."""
    return sorted({c.split(".", 1)[1] for c in runs.columns if c.startswith("valid_bits.") and not c.endswith(" sd")})


def _cell(ctx: Context, row: pd.Series) -> str:
    return cell_text({k: row[k] for k in ctx.manifest.grid_for(ctx.scale)}) or str(row["run_id"])


def _fmt(value: float, sd: float = math.nan) -> str:
    if value is None or pd.isna(value):
        return "-"
    return f"{value:.3f}" + ("" if pd.isna(sd) else f" ± {sd:.3f}")


@renderer("probe-classes", reads=("valid_bits.<class>", "floor_bits.<class>", "blind_bits.<class>"))
def probe_classes(ctx: Context) -> Files:
    """Valid bits per dependency class of every cell (mean ± sd over seeds), beside each class's floor
    (the generator's entropy given the source) and blind level (a model that cannot see the source)."""
    names = [c for c in classes(ctx.runs) if c != "unseen"]
    if not names:
        return []
    rows = []
    for _, row in ctx.runs.iterrows():
        out = {"cell": _cell(ctx, row), "seeds": int(row.get("seeds", 1))}
        for name in names:
            out[f"{name} bits"] = _fmt(row.get(f"valid_bits.{name}"), spread(row, f"valid_bits.{name}"))
            out[f"{name} floor / blind"] = (
                f"{_fmt(row.get(f'floor_bits.{name}'))} / {_fmt(row.get(f'blind_bits.{name}'))}"
            )
        out["unseen targets"] = row.get("valid_targets.unseen")
        rows.append(out)
    table = ctx.write_table(
        "classes",
        pd.DataFrame(rows),
        "Bits per dependency class (valid split)",
        [
            "floor: the generator's entropy given the true source; blind: the best prediction without it",
            "unseen: targets whose source lies before their evaluation stream or window, scored apart",
        ],
    )
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    x = np.arange(len(ctx.runs))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        bits = ctx.runs.get(f"valid_bits.{name}", pd.Series([math.nan] * len(x))).astype(float).to_numpy()
        sd = [spread(r, f"valid_bits.{name}") for _, r in ctx.runs.iterrows()]
        ax.bar(x + i * width, bits, width, label=f"{name} (valid)")
        error_bars(ax, x + i * width, bits, yerr=sd, color="k")
        for j, (_, row) in enumerate(ctx.runs.iterrows()):
            for level, style in (("floor", "--"), ("blind", ":")):
                value = row.get(f"{level}_bits.{name}")
                if value is not None and not pd.isna(value):
                    left = x[j] + i * width - width / 2
                    ax.hlines(value, left, left + width, colors="k", linestyles=style, zorder=3)
    ax.set_xticks(x + width * (len(names) - 1) / 2, [_cell(ctx, r) for _, r in ctx.runs.iterrows()], fontsize=7)
    ax.set_ylabel("bits per symbol (dashed: floor, dotted: blind)")
    ax.set_title(ctx.title(f"{ctx.manifest.name}: bits per dependency class"), fontsize=9)
    legend(ax, fontsize=7)
    figure = ctx.save_figure(fig, "classes")
    return [(table, "Bits per dependency class"), (figure, f"Bits per dependency class ({ctx.label})")]


@renderer("probe-horizon", reads=("span_max", "valid_bits.long", "blind_bits.long", "floor_bits.long"))
def probe_horizon(ctx: Context) -> Files:
    """The gradient horizon: for each ramp R, the longest learned span z against the distance D the data
    depends on (found: z near D), and the bits on the D-dependent targets (found: far below blind);
    from z = 0 the mask of eq. 4 gives no gradient at D >= R."""
    runs = ctx.runs
    if not {"span_max", "valid_bits.long", "model.span.ramp", "data.synthetic.distance"} <= set(runs.columns):
        return []
    runs = runs.sort_values(["model.span.ramp", "data.synthetic.distance"])
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    rows = []
    for ramp, group in runs.groupby("model.span.ramp"):
        d = group["data.synthetic.distance"].astype(float)
        z = group["span_max"].astype(float)
        bits = group["valid_bits.long"].astype(float)
        (line,) = left.plot(d, z, "o-", label=f"R = {ramp:g}")
        error_bars(left, d, z, yerr=[spread(r, "span_max") for _, r in group.iterrows()], color=line.get_color())
        left.axvline(ramp, color=line.get_color(), ls=":", lw=1)
        right.plot(d, bits, "o-", color=line.get_color(), label=f"R = {ramp:g}")
        error_bars(right, d, bits, yerr=[spread(r, "valid_bits.long") for _, r in group.iterrows()])
        right.axvline(ramp, color=line.get_color(), ls=":", lw=1)
        for _, r in group.iterrows():
            found = r["valid_bits.long"] < r["blind_bits.long"] - 0.25 * (r["blind_bits.long"] - r["floor_bits.long"])
            rows.append(
                {
                    "R": int(ramp),
                    "D": int(r["data.synthetic.distance"]),
                    "known answer": "found" if r["data.synthetic.distance"] < ramp else "not found",
                    "longest span z": _fmt(r["span_max"], spread(r, "span_max")),
                    "bits on D targets": _fmt(r["valid_bits.long"], spread(r, "valid_bits.long")),
                    "floor / blind": f"{_fmt(r['floor_bits.long'])} / {_fmt(r['blind_bits.long'])}",
                    "measured": "found" if found else "not found",
                    "seeds": int(r.get("seeds", 1)),
                }
            )
    ds = sorted(runs["data.synthetic.distance"].astype(float).unique())
    left.plot(ds, ds, color="gray", lw=1, ls="--", label="z = D")
    left.set_xlabel("distance D the data depends on (dotted: D = R)")
    left.set_ylabel("longest learned span z (tokens)")
    right.axhline(float(runs["blind_bits.long"].iloc[0]), color="k", ls=":", lw=1, label="blind")
    right.axhline(float(runs["floor_bits.long"].iloc[0]), color="k", ls="--", lw=1, label="floor")
    right.set_xlabel("distance D")
    right.set_ylabel("valid bits on the D-dependent targets")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        legend(ax, fontsize=7)
    fig.suptitle(textwrap.fill(ctx.title("The gradient horizon of the adaptive span from z = 0"), 140), fontsize=8)
    figure = ctx.save_figure(fig, "horizon")
    table = ctx.write_table(
        "horizon",
        pd.DataFrame(rows),
        "The gradient horizon: from z = 0, which distances D the span finds, for each ramp R",
        ["found: bits on the D-dependent targets below blind by a quarter of the way to the floor (used[long])"],
    )
    return [(table, "The gradient horizon"), (figure, f"The gradient horizon ({ctx.label})")]
