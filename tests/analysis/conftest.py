"""``drawn``: what each figure a renderer saves plots, read off its axes as it is saved, so that the renderer
tests assert on the data drawn (lines, points, bars, images) rather than on the file."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import LineCollection

from repro.report.renderers import Context


def _axes(ax) -> dict:
    return {
        "title": ax.get_title(),
        "lines": [(line.get_label(), np.asarray(line.get_xdata()), np.asarray(line.get_ydata())) for line in ax.lines],
        "points": [np.asarray(c.get_offsets()) for c in ax.collections if not isinstance(c, LineCollection)],
        "errorbars": [
            [np.asarray(seg) for seg in c.get_segments()] for c in ax.collections if isinstance(c, LineCollection)
        ],
        "bars": [p.get_height() for p in ax.patches],
        "images": [np.asarray(im.get_array()) for im in ax.images],
    }


@pytest.fixture
def drawn(monkeypatch) -> dict[str, list[dict]]:
    """{figure stem: [per axes: title, lines (label, x, y), points, error bars (segments), bar heights, images]} of every figure
    saved during the test."""
    figures: dict[str, list[dict]] = {}
    save = Context.save_figure

    def capture(self, fig, stem):
        figures[stem] = [_axes(ax) for ax in fig.axes]
        return save(self, fig, stem)

    monkeypatch.setattr(Context, "save_figure", capture)
    return figures
