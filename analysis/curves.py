"""Renderers shared by every manifest: training curves of the stored runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from repro.config.cells import cell_text
from repro.report.renderers import Context, legend, pyplot, renderer


@renderer("curves", reads=("metrics.csv:train/bits", "metrics.csv:valid/bits_quick"))
def curves(ctx: Context) -> list[tuple[Path, str]]:
    """Training bits against step for every run, and in the same colour its quick validation bits where
    logged (``train.val_every``); the title says when no run logged them (tiny scales do not). Runs of
    pretrained weights (scored, never trained here) get no figure."""
    if "weights_source" in ctx.runs and ctx.runs["weights_source"].notna().all():
        return []  # the authors' weights, scored (scale pretrained): nothing was trained here, no curve
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    validated = False
    for _, row in ctx.runs.iterrows():
        seeds = [ctx.run_dir(r).metrics() for r in ctx.seeds_of(row)]
        seeds = [m for m in seeds if not m.empty and "train/bits" in m]
        if not seeds:
            continue
        metrics = seeds[0]
        label = cell_text({k: row[k] for k in ctx.manifest.grid_for(ctx.scale)}) or row["run_id"]
        if len(seeds) > 1:  # the seeds' mean, and their range as a band
            both = pd.concat([m.set_index("step")["train/bits"].dropna() for m in seeds], axis=1).dropna()
            (line,) = ax.plot(both.index, both.mean(axis=1), label=f"{label} (train, mean of {len(seeds)} seeds)")
            ax.fill_between(both.index, both.min(axis=1), both.max(axis=1), color=line.get_color(), alpha=0.2)
        else:
            (line,) = ax.plot(metrics["step"], metrics["train/bits"], label=f"{label} (train)")
        if "valid/bits_quick" in metrics and metrics["valid/bits_quick"].notna().any():
            valid = metrics.dropna(subset=["valid/bits_quick"])
            ax.plot(valid["step"], valid["valid/bits_quick"], "o--", color=line.get_color(), label=f"{label} (valid)")
            validated = True
    ax.set_xlabel("step")
    ax.set_ylabel(ctx.bits_per)
    what = f"{ctx.manifest.name}: training curves" + ("" if validated else " (no run logged quick validation)")
    ax.set_title(ctx.title(what), fontsize=9)
    legend(ax, fontsize=7)
    path = ctx.save_figure(fig, "curves")
    return [(path, f"Training curves ({ctx.label})")]
