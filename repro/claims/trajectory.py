"""The trajectory gate: is a bits verdict the budget's? Judged on the *paired margin's trajectory* at
matched steps, not on one arm's last-fifth gain (which a cosine schedule keeps large by construction).

For each comparison of two bits selections, on every seed, the two arms' learning curves are matched step
by step: the quick validation (``valid/bits_quick``) where every run logged it, else the training bits
(``train/bits``), which every run logs and which compares the arms on the same batches at each step (the
seeds vary the initialisation only, so the arms of one seed see one data order).

**The rule** (issue "Verdicts, round four", point 2). On each seed, the margin (positive: the verdict's
side) over the last :data:`FIT` of its matched checkpoints is fitted by a line in log-steps and read at
:data:`FURTHER` times the last step: e_i, where that seed's margin is heading. The gate holds when the
seeds' mean extrapolated margin is on the verdict's side beyond noise: its paired t statistic (mean over
its standard error) exceeds the one-sided :data:`OVERTAKEN` quantile of t with n - 1 degrees of freedom.
So a baseline whose curve reaches the claimed side's exactly at 1.5 x the steps (e = 0) passes at most
10% of the time, at any number of seeds; a margin that stays at the claim's smallest effect of interest
is stopped less often the more seeds there are (its t grows with sqrt(n)). One seed has no spread: its
e must have the verdict's sign. The price is the noise of a slope:
to stop an overtaking baseline 90% of the time and keep 80% of the margins that stay at the sesoi needs
sesoi >= (t_0.9 + t_0.8) SE, about 2.1 SE. With the stored cpu runs' noise (as-table1 adaptive vs
fixed-32: 0.016 bits about each seed's line, slopes spread by 0.014 per log-step) a margin steady at a
0.02-bit sesoi is stopped 53% of the time at 3 seeds, 29% at 5 and 13% at 8, while a baseline that
catches up at 1.5 x passes 9% at each (tests/spine/test_spine_trajectory.py). So a 3-seed claim whose
margin is near its sesoi often reads not evaluable here: more seeds, or a longer run, decide it.

A run without a curve, or two arms with fewer than four matched checkpoints, makes the verdict not
evaluable, saying which.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from repro.store.usable import TRAIN, has_curve

QUICK = "valid/bits_quick"
FIT = 0.6  # of each seed's matched checkpoints: the stretch its margin's line is fitted on
MIN_POINTS = 4
FURTHER = 1.5  # where the line is read: this multiple of the last matched step
OVERTAKEN = 0.10  # the pass rate allowed to a baseline that catches up exactly at FURTHER x the steps

Curves = Callable[[str], "pd.DataFrame | None"]


class Fails(Exception):
    """The gate fails (its message says how)."""


def curve(frame: pd.DataFrame | None, metric: str) -> pd.Series:
    """``metric`` by step (the last value a step logged), empty when the run did not log it."""
    if frame is None or metric not in frame or "step" not in frame:
        return pd.Series(dtype=float)
    rows = frame.dropna(subset=[metric])
    return rows.groupby("step")[metric].last().astype(float)


def heading(margin: pd.Series) -> float:
    """Where one seed's margin (by step) is heading: its line in log-steps over the last :data:`FIT` of the
    checkpoints, read at :data:`FURTHER` x the last step."""
    margin = margin[margin.index > 0]
    tail = margin.iloc[-max(MIN_POINTS, math.ceil(FIT * len(margin))) :]
    x = np.log(tail.index.to_numpy(dtype=float) / float(tail.index.max()))
    slope, at_end = np.polyfit(x, tail.to_numpy(dtype=float), 1)
    return float(at_end + slope * math.log(FURTHER))


def passes(headings: list[float]) -> tuple[bool, float, float]:
    """(whether the mean heading is on the verdict's side beyond noise, the mean, its t statistic; NaN
    for one seed) for the per-seed headings, signed so that positive is the verdict's side."""
    from scipy import stats  # slow to import; only judging needs it

    e = np.asarray(headings, dtype=float)
    if len(e) < 2:
        return bool(e[0] > 0), float(e[0]), math.nan
    se = float(e.std(ddof=1)) / math.sqrt(len(e))
    t = float(e.mean()) / se if se > 0 else math.copysign(math.inf, float(e.mean()))
    return t > float(stats.t.ppf(1 - OVERTAKEN, len(e) - 1)), float(e.mean()), t


def check(pairs: list[tuple[str, str]], curves: Curves, reading: int) -> str:
    """The gate on one comparison: ``pairs`` = (claimed-lower run, baseline run) per seed; ``reading`` the
    verdict's sign (+1: the claimed-lower side is lower). Returns what held; raises :class:`Fails`."""
    frames = {run: curves(run) for pair in pairs for run in pair}
    missing = [run for run, frame in frames.items() if not has_curve(frame)]
    if missing:
        raise Fails(
            f"no learning curve for run(s) {', '.join(sorted(missing))}: a verdict with no curve cannot show it is not the budget's"
        )
    metric = QUICK if all(not curve(f, QUICK).empty for f in frames.values()) else TRAIN
    word = "quick validation" if metric == QUICK else "training bits on the shared batches"
    headings = []
    for lower_run, base_run in pairs:
        low, base = curve(frames[lower_run], metric), curve(frames[base_run], metric)
        both = pd.concat([low, base], axis=1, join="inner").dropna()
        both = both[both.index > 0]
        if len(both) < MIN_POINTS:
            raise Fails(f"runs {lower_run} and {base_run} share {len(both)} logged steps: too few to follow the margin")
        headings.append(reading * float(heading(both.iloc[:, 1] - both.iloc[:, 0])))
    ok, mean, t = passes(headings)
    each = ", ".join(f"{h:+.3g}" for h in headings)  # positive: the verdict's side
    n = len(headings)
    read = f"one seed: {each}" if math.isnan(t) else f"mean of {n} seeds {mean:+.3g} ({each}), t = {t:.2f}"
    if not ok:
        raise Fails(
            f"the margin's {word} heads to the baseline's side by {FURTHER:g} x the steps, or cannot be told from "
            f"it ({read}; a gate at {1 - OVERTAKEN:.0%}, lines in log-steps over the last {FIT:.0%})"
        )
    return (
        f"trajectory ({word}): the margin read at {FURTHER:g} x the steps stays on the claim's side "
        f"({read}; positive: the claim's side)"
    )
