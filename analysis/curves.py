"""Renderers shared by every manifest: training curves of the stored runs."""

from __future__ import annotations

from pathlib import Path

from repro.config.cells import cell_text
from repro.report.renderers import Context, legend, pyplot, renderer


@renderer("curves", reads=("metrics.csv:train/bits", "metrics.csv:valid/bits_quick"))
def curves(ctx: Context) -> list[tuple[Path, str]]:
    """Training bits against step for every run (and the quick validation bits when logged)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for _, row in ctx.runs.iterrows():
        metrics = ctx.run_dir(row["run_id"]).metrics()
        if metrics.empty or "train/bits" not in metrics:
            continue
        label = cell_text({k: row[k] for k in ctx.manifest.grid_for(ctx.scale)}) or row["run_id"]
        ax.plot(metrics["step"], metrics["train/bits"], label=f"{label} (train)")
        if "valid/bits_quick" in metrics:
            valid = metrics.dropna(subset=["valid/bits_quick"])
            ax.plot(valid["step"], valid["valid/bits_quick"], "o--", label=f"{label} (valid)")
    ax.set_xlabel("step")
    ax.set_ylabel("bits per symbol")
    ax.set_title(f"{ctx.manifest.name}: training curves\n{ctx.label}", fontsize=9)
    legend(ax, fontsize=7)
    path = ctx.save_figure(fig, "curves")
    return [(path, f"Training curves ({ctx.label})")]
