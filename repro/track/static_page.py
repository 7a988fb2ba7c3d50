"""``repro dashboard --static``: stored runs compared in one self-contained HTML file (inline SVG, no
script, no network), readable wherever a browser opens a file.

Per manifest, at one scale: each grid cell's test bits as a dot (the mean over its seeds) and a whisker
(± one standard deviation), the numbers the report's table shows (:func:`repro.claims.select.seed_means`
of the current runs, :func:`repro.report.assemble.split_current`), on an axis that spans them (bars from
zero make 2.605 and 2.762 look alike), in the unit of the runs' data; each cell's full label and its n.
Then each cell's training bits and, where stored, its quick-validation bits against steps (metrics.csv),
one line per seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from repro.claims.select import SEED, cell_labels, seed_means
from repro.config.cells import cell_text
from repro.config.manifest import Manifest
from repro.report.assemble import cell_keys, split_current
from repro.report.renderers import bits_unit, datasets, format_value
from repro.store.runs import RunDir, table

METRIC = "test_bits"  # the headline every report's table leads with
CURVES = (("train/bits", "training"), ("valid/bits_quick", "quick validation"))
COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")  # a seed each (Okabe-Ito)
STRIP, ROW, EDGE = 460, 22, 24  # the dot chart: width, row height, room at each end for a tick's label
WIDE, HIGH, LEFT, RIGHT, FOOT = 300, 160, 46, 18, 34  # a curve chart: size, room for its tick labels
POINTS = 400  # at most this many points a line
STYLE = """body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;max-width:1100px}
table.cells{border-collapse:collapse}td{padding:0 .6em 0 0;vertical-align:middle}
td.label{max-width:30em;overflow-wrap:anywhere;padding:.15em .8em .15em 0}td.num{white-space:nowrap}
.cell{margin:1em 0}.cell h4{margin:.2em 0;overflow-wrap:anywhere}svg text{font:11px system-ui,sans-serif}"""


@dataclass
class Cell:
    label: str
    n: int  # the seeds averaged
    mean: float  # NaN: no seed stores the metric
    sd: float  # NaN: one seed
    runs: list[tuple[Any, RunDir, str]]  # (seed, run, status)

    @property
    def whisker(self) -> float:
        """How far the whisker reaches each side of the mean: one sd, none for one seed."""
        return 0.0 if math.isnan(self.sd) else self.sd


@dataclass
class Panel:
    manifest: Manifest
    unit: str  # bits per byte, per char, ...
    data: str
    cells: list[Cell]


def panel(manifest: Manifest, root: Path, scale: str) -> Panel | None:
    """The manifest's current runs at ``scale`` by grid cell, as its report averages them (None: none)."""
    runs = table(root, manifest.name)
    rows = split_current(manifest, scale, runs)[0] if not runs.empty else runs
    if rows.empty:
        return None
    keys = cell_keys(manifest, scale)
    means, of = seed_means(rows, keys), cell_labels(rows, keys)
    cells = []
    for label, (_, row) in zip(cell_labels(means, keys), means.iterrows()):
        seeds = rows[of == label]
        cells.append(
            Cell(
                cell_text({k: row[k] for k in keys if k in means}) or "(one cell: no grid)",
                int(row["seeds"]),
                _number(row.get(METRIC)),
                _number(row.get(f"{METRIC} sd")),
                [(r.get(SEED), RunDir(root, manifest.name, r["run_id"]), r["status"]) for _, r in seeds.iterrows()],
            )
        )
    return Panel(manifest, bits_unit(rows), datasets(rows), cells)


def page(panels: list[Panel], scale: str, absent: list[str]) -> str:
    """The whole HTML file: a section per panel, then the manifests with no run at ``scale``."""
    title = f"repro: stored runs compared at scale {scale}"
    parts = [
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>",
        "<p>Each dot: a grid cell's test bits, the mean over its seeds (n); the whisker: ± one standard deviation "
        "over them (none where n=1). The numbers of the manifest's report table; lower is better. Then each "
        "cell's curves against steps, one line per seed.</p>",
        *(_section(p) for p in panels),
    ]
    if absent:
        parts.append(f"<p>No runs at scale {escape(scale)}: {escape(', '.join(absent))}.</p>")
    return "\n".join(parts) + "\n</body></html>\n"


def ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round values from at or below ``lo`` to at or above ``hi``, about ``count`` steps apart: an axis
    from the first to the last spans the data, not from zero."""
    if not hi > lo:
        pad = abs(lo) * 0.05 or 0.5
        lo, hi = lo - pad, hi + pad
    rough = (hi - lo) / count
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= rough * (1 - 1e-9))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)]


def _section(p: Panel) -> str:
    m = p.manifest
    head = f"<section><h2>{escape(m.name)}: {escape(m.title)}</h2><p>data: {escape(p.data)} ({escape(p.unit)})</p>"
    return head + _dot_chart(p) + "".join(_curves(c, p.unit) for c in p.cells) + "</section>"


def _dot_chart(p: Panel) -> str:
    """A row a cell (label, n, mean ± sd, its dot and whisker), then the axis they share, ticks labelled."""
    shown = [c for c in p.cells if not math.isnan(c.mean)]
    if not shown:
        return "<p>No cell stores test bits (no split scored).</p>"
    axis = ticks(min(c.mean - c.whisker for c in shown), max(c.mean + c.whisker for c in shown))
    x = _scale(axis[0], axis[-1], EDGE, STRIP - EDGE)
    grid = "".join(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="0" y2="{ROW}" stroke="#e4e4e4"/>' for t in axis)
    rows = []
    for c in p.cells:
        marks, value, y = "", "no test bits stored", ROW / 2
        if not math.isnan(c.mean):
            value = format_value(c.mean) + ("" if math.isnan(c.sd) else f" ± {format_value(c.sd, 2)}")
            lo, hi = x(c.mean - c.whisker), x(c.mean + c.whisker)
            marks = (
                f'<path d="M{lo:.1f} {y}H{hi:.1f}M{lo:.1f} {y - 5}v10M{hi:.1f} {y - 5}v10" stroke="#333"/>'
                f'<circle cx="{x(c.mean):.1f}" cy="{y}" r="4" fill="#0072b2"/>'
            )
        rows.append(
            f'<tr><td class="label">{escape(c.label)}</td><td class="num">n={c.n}</td>'
            f'<td class="num">{escape(value)}</td><td><svg width="{STRIP}" height="{ROW}">{grid}{marks}</svg></td></tr>'
        )
    labels = "".join(
        f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="0" y2="5" stroke="#333"/>'
        f'<text class="tick" x="{x(t):.1f}" y="17" text-anchor="middle">{escape(format_value(t))}</text>'
        for t in axis
    )
    unit = f'<text x="{STRIP / 2}" y="34" text-anchor="middle">test {escape(p.unit)} (lower is better)</text>'
    line = f'<path d="M{EDGE} 0H{STRIP - EDGE}" stroke="#333"/>'
    axis_row = f'<tr><td colspan="3"></td><td><svg class="axis" width="{STRIP}" height="40">{line}{labels}{unit}</svg></td></tr>'
    return f'<table class="cells">{"".join(rows)}{axis_row}</table>'


def _curves(c: Cell, unit: str) -> str:
    """The cell's curves: one chart a metric any of its runs stores, one line a seed."""
    frames = [(seed, run.metrics(), status) for seed, run, status in c.runs]
    charts = []
    for column, what in CURVES:
        lines = []
        for i, (_, frame, _) in enumerate(frames):
            if column in frame and "step" in frame:
                kept = frame[["step", column]].replace([math.inf, -math.inf], math.nan).dropna()
                kept = kept.iloc[:: max(1, math.ceil(len(kept) / POINTS))]
                if not kept.empty:
                    lines.append((COLOURS[i % len(COLOURS)], list(kept["step"]), list(kept[column])))
        if lines:
            charts.append(_line_chart(f"{what}, {unit}", lines))
    key = " ".join(
        f'<span style="color:{COLOURS[i % len(COLOURS)]}">&#9473; seed {escape(format_value(seed))}'
        + ("" if status == "finished" else f" ({escape(str(status))})")
        + "</span>"
        for i, (seed, _, status) in enumerate(frames)
    )
    body = "".join(charts) or "<p>No curve stored.</p>"
    return f'<div class="cell"><h4>{escape(c.label)} (n={c.n})</h4><div>{key}</div>{body}</div>'


def _line_chart(title: str, lines: list[tuple[str, list, list]]) -> str:
    xs = ticks(min(min(s) for _, s, _ in lines), max(max(s) for _, s, _ in lines), 4)
    ys = ticks(min(min(v) for _, _, v in lines), max(max(v) for _, _, v in lines), 4)
    x, y = _scale(xs[0], xs[-1], LEFT, WIDE - RIGHT), _scale(ys[0], ys[-1], HIGH - FOOT, 18)
    out = [f'<text x="{LEFT}" y="12">{escape(title)}</text>']
    for t in ys:
        out.append(f'<line x1="{LEFT}" x2="{WIDE - RIGHT}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{LEFT - 4}" y="{y(t) + 4:.1f}" text-anchor="end">{escape(format_value(t))}</text>')
    for t in xs:
        out.append(f'<text x="{x(t):.1f}" y="{HIGH - FOOT + 14}" text-anchor="middle">{escape(format_value(t))}</text>')
    out.append(f'<text x="{(LEFT + WIDE) / 2}" y="{HIGH - 4}" text-anchor="middle">step</text>')
    for colour, steps, values in lines:
        points = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in zip(steps, values))
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
    return f'<svg width="{WIDE}" height="{HIGH}">{"".join(out)}</svg>'


def _scale(lo: float, hi: float, start: float, end: float):
    """The map of [lo, hi] onto [start, end] (pixels)."""
    return lambda v: start + (v - lo) / (hi - lo) * (end - start)


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan
