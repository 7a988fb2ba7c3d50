"""``drawn``: what each figure a renderer saves plots, read off its axes as it is saved, so that the renderer
tests assert on the data drawn (lines, points, bars, images) rather than on the file."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import LineCollection

from repro.report.renderers import Context


def _axes(ax, renderer) -> dict:
    legend = ax.get_legend()
    box = ax.get_window_extent(renderer)
    return {
        "title": ax.get_title(),
        "suptitle": ax.figure.get_suptitle(),
        "ylabel": ax.get_ylabel(),
        # whether the drawn (laid out) legend lies over the plotting area, and whether gridlines show
        "legend_over_data": legend is not None and legend.get_window_extent(renderer).overlaps(box),
        "grid": any(line.get_visible() for line in ax.get_xgridlines() + ax.get_ygridlines()) and ax.axison,
        "lines": [(line.get_label(), np.asarray(line.get_xdata()), np.asarray(line.get_ydata())) for line in ax.lines],
        "points": [np.asarray(c.get_offsets()) for c in ax.collections if not isinstance(c, LineCollection)],
        "errorbars": [
            [np.asarray(seg) for seg in c.get_segments()] for c in ax.collections if isinstance(c, LineCollection)
        ],
        "bars": [p.get_height() for p in ax.patches],
        "images": [np.asarray(im.get_array()) for im in ax.images],
        "colors": {line.get_label(): line.get_color() for line in ax.lines},
        "ylim": ax.get_ylim(),
        # text written on the axes (annotations: a one-seed bar's n=1), each with where it is anchored
        "texts": [(t.get_text(), getattr(t, "xy", t.get_position())) for t in ax.texts],
    }


@pytest.fixture
def drawn(monkeypatch) -> dict[str, list[dict]]:
    """{figure stem: [per axes: title, the figure's suptitle, y label, legend over the data, grid shown,
    lines (label, x, y), points, error bars (segments), bar heights, images, line colours by label, y limits,
    texts]} of
    every figure saved during the test."""
    figures: dict[str, list[dict]] = {}
    save = Context.save_figure

    def capture(self, fig, stem):
        fig.tight_layout()  # as saved
        renderer = fig.canvas.get_renderer()
        figures[stem] = [_axes(ax, renderer) for ax in fig.axes]
        return save(self, fig, stem)

    monkeypatch.setattr(Context, "save_figure", capture)
    return figures
