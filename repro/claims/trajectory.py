"""The trajectory gate: is a bits verdict the budget's? Judged on the *paired margin's trajectory* at
matched steps, not on one arm's last-fifth gain (which a cosine schedule keeps large by construction).

For each comparison of two bits selections, on every seed, the two arms' learning curves are matched step
by step: the quick validation (``valid/bits_quick``) where every run logged it, else the training bits
(``train/bits``), which every run logs and which compares the arms on the same batches at each step (the
seeds vary the initialisation only, so the arms of one seed see one data order). The gate holds when:

1. **the sign holds**: over the last 40% of the matched checkpoints, split into four consecutive blocks,
   every block's mean margin has the verdict's sign, on every seed; and
2. **the fits do not cross**: each arm's seed-averaged curve over its last 60%, fitted by a power law in
   steps (``a + b · t^-alpha``, alpha on a grid), keeps the verdict's sign for up to 50% more steps.

A run without a curve, or two arms with fewer than four matched checkpoints, makes the verdict not
evaluable, saying which.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

QUICK, TRAIN = "valid/bits_quick", "train/bits"
LAST = 0.4  # of the matched checkpoints: the stretch whose blocks must keep the sign
BLOCKS = 4
FIT = 0.6  # of each curve: the stretch the power law is fitted on
FURTHER = 1.5  # the fits must keep the sign up to this multiple of the steps
ALPHAS = np.geomspace(0.05, 3.0, 40)

Curves = Callable[[str], "pd.DataFrame | None"]


class Fails(Exception):
    """The gate fails (its message says how)."""


def curve(frame: pd.DataFrame | None, metric: str) -> pd.Series:
    """``metric`` by step (the last value a step logged), empty when the run did not log it."""
    if frame is None or metric not in frame or "step" not in frame:
        return pd.Series(dtype=float)
    rows = frame.dropna(subset=[metric])
    return rows.groupby("step")[metric].last().astype(float)


def power_law(steps: np.ndarray, bits: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The least-squares ``a + b · t^-alpha`` (alpha on :data:`ALPHAS`) through (steps, bits)."""
    best = None
    for alpha in ALPHAS:
        basis = np.stack([np.ones_like(steps), steps**-alpha], axis=1)
        coef, *_ = np.linalg.lstsq(basis, bits, rcond=None)
        error = float(np.sum((basis @ coef - bits) ** 2))
        if best is None or error < best[0]:
            best = (error, alpha, coef)
    _, alpha, (a, b) = best
    return lambda t: a + b * np.asarray(t, dtype=float) ** -alpha


def check(pairs: list[tuple[str, str]], curves: Curves, reading: int) -> str:
    """The gate on one comparison: ``pairs`` = (claimed-lower run, baseline run) per seed; ``reading`` the
    verdict's sign (+1: the claimed-lower side is lower). Returns what held; raises :class:`Fails`."""
    frames = {run: curves(run) for pair in pairs for run in pair}
    missing = [run for run, frame in frames.items() if frame is None or curve(frame, TRAIN).empty]
    if missing:
        raise Fails(
            f"no learning curve for run(s) {', '.join(sorted(missing))}: a verdict with no curve cannot show it is not the budget's"
        )
    metric = QUICK if all(not curve(f, QUICK).empty for f in frames.values()) else TRAIN
    word = "quick validation" if metric == QUICK else "training bits on the shared batches"
    margins, arms = [], ([], [])
    for lower_run, base_run in pairs:
        low, base = curve(frames[lower_run], metric), curve(frames[base_run], metric)
        both = pd.concat([low, base], axis=1, join="inner").dropna()
        if len(both) < BLOCKS:
            raise Fails(f"runs {lower_run} and {base_run} share {len(both)} logged steps: too few to follow the margin")
        margins.append(both.iloc[:, 1] - both.iloc[:, 0])
        arms[0].append(low)
        arms[1].append(base)
    flipped = []
    for seed, margin in enumerate(margins):
        tail = margin.iloc[-max(BLOCKS, math.ceil(LAST * len(margin))) :]
        blocks = [float(b.mean()) for b in np.array_split(tail.to_numpy(), BLOCKS)]
        if any(b * reading <= 0 for b in blocks):
            flipped.append(f"seed {seed}: {', '.join(f'{b:+.3g}' for b in blocks)}")
    if flipped:
        raise Fails(f"the margin's sign flips within the last {LAST:.0%} of the {word} ({'; '.join(flipped)})")
    end = min(float(a.index.max()) for side in arms for a in side)
    ahead = np.linspace(end, FURTHER * end, 11)
    fits = []
    for side in arms:
        mean = pd.concat(side, axis=1, join="inner").mean(axis=1)
        mean = mean[mean.index > 0]
        fitted = mean.iloc[-max(3, math.ceil(FIT * len(mean))) :]
        fits.append(power_law(fitted.index.to_numpy(dtype=float), fitted.to_numpy()))
    projected = fits[1](ahead) - fits[0](ahead)
    if np.any(projected * reading <= 0):
        at = ahead[np.argmax(projected * reading <= 0)]
        raise Fails(
            f"power-law fits of the two arms' {word} cross by step {at:.0f} ({at / end:.2f} x the steps): "
            f"margin {projected[0]:+.3g} now, {projected[-1]:+.3g} at {FURTHER:g} x"
        )
    return (
        f"trajectory ({word}): the margin kept its sign over the last {LAST:.0%} on {len(pairs)} of {len(pairs)} "
        f"seeds; the fits keep it to {FURTHER:g} x the steps ({projected[-1]:+.3g} there)"
    )
