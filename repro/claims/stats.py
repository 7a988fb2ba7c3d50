"""The statistics of a verdict, pure functions of numbers: Student's t quantiles and p values, the minimum
detectable effect (the noncentral t, exact at any number of seeds), combining a claim's parts without
inflating its error (Bonferroni inside a claim), the family adjustments (Holm, Benjamini-Hochberg) and a
sign-flip permutation p value beside the t one.

scipy is imported inside the functions: it is slow to import and only judging needs it.
"""

from __future__ import annotations

import itertools
import math

CONFIDENCE = 0.95
POWER = 0.8  # the power at which a minimum detectable effect is stated


def t_quantile(confidence: float, df: int) -> float:
    """Student's one-sided t quantile for ``confidence`` at ``df`` degrees of freedom."""
    from scipy.special import stdtrit

    return float(stdtrit(df, confidence))


def one_sided(m: float, se: float, n: int) -> tuple[float, float]:
    """(p of "the true margin is above 0", p of "below 0"): one-sided t tests of the mean margin ``m`` with
    standard error ``se`` over ``n`` seeds. No spread: the sign decides (0 for its reading, 1 for the other)."""
    if not se > 0:
        return (0.0, 1.0) if m > 0 else (1.0, 0.0) if m < 0 else (1.0, 1.0)
    from scipy.special import stdtr

    return float(1 - stdtr(n - 1, m / se)), float(stdtr(n - 1, m / se))


def tost(m: float, se: float, n: int, k: float) -> tuple[float, float]:
    """(p of "inside (-k, k)": the two one-sided tests' larger p, p of "beyond the nearer edge")."""
    above, below = one_sided(m + k, se, n)[0], one_sided(m - k, se, n)[1]
    beyond = one_sided(m - k, se, n)[0] if m >= 0 else one_sided(m + k, se, n)[1]
    return max(above, below), beyond


def two_sided(m: float, se: float, n: int) -> float:
    """The two-sided p of a zero margin: what a family adjustment is fed (the direction is read from the
    data, so a one-sided p of the direction found would halve it)."""
    return min(1.0, 2 * min(one_sided(m, se, n)))


def detectable(n: int, confidence: float = CONFIDENCE, power: float = POWER) -> float:
    """The minimum detectable effect of a one-sided t test at ``n`` seeds, in standard errors of the mean
    margin: the noncentrality at which P(T' > t(c, n - 1)) = ``power`` for T' a noncentral t. (The usual
    ``t(c) + t(power)`` is an approximation, 6% low at two seeds.)"""
    from scipy.optimize import brentq
    from scipy.stats import nct

    df, crit = n - 1, t_quantile(confidence, n - 1)

    def short(delta: float) -> float:  # below 0 while ``delta`` is too small to reach the power
        return nct.sf(crit, df, delta) - power

    high = 100.0  # a strict family level at two seeds (one degree of freedom) needs a noncentrality past it
    while short(high) < 0:
        if high > 1e8:
            return math.inf
        high *= 10
    return float(brentq(short, 0.0, high))


def detectable_band(n: int, confidence: float = CONFIDENCE, power: float = POWER) -> float:
    """The half-width a band must have for two one-sided tests at ``n`` seeds to find a true zero margin
    inside it at ``power``, in standard errors: ``t(c, n - 1) + t((1 + power) / 2, n - 1)``."""
    return t_quantile(confidence, n - 1) + t_quantile((1 + power) / 2, n - 1)


def sign_flip(margins: list[float]) -> float:
    """The exact one-sided sign-flip permutation p of a positive mean margin: the share of the 2^n sign
    assignments whose mean is at least the observed one (no normality assumed; at 3 seeds its smallest
    value is 1/8, so it can never decide at 5% alone: it is shown beside the t p, never instead)."""
    n = len(margins)
    if n < 2 or n > 16:
        return math.nan
    observed = sum(margins) / n
    flips = itertools.product((1, -1), repeat=n)
    return sum(sum(s * m for s, m in zip(signs, margins)) / n >= observed - 1e-12 for signs in flips) / 2**n


def bonferroni(p_values: list[float]) -> float:
    """The p of "at least one of these holds", corrected for their number (k parts: k times the smallest)."""
    finite = [p for p in p_values if not math.isnan(p)]
    return min(1.0, len(finite) * min(finite)) if finite else math.nan


def holm_levels(p_values: list[float], alpha: float = 1 - CONFIDENCE) -> list[float]:
    """Holm's bar for each test, in the order given: alpha / (m - rank) at its rank in the sorted p values
    (the level at which its adjusted verdict is read)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [alpha] * m
    for rank, i in enumerate(order):
        out[i] = alpha / (m - rank)
    return out


def noisy_mde(n: int) -> float:
    """P(the estimated MDE exceeds the true one) at ``n`` seeds: the MDE scales with the sample sd, so it
    is P(s > sigma) = P(chi2(n - 1) > n - 1) (3 seeds: e^-1 = 37%): a claim whose true MDE equals its
    smallest effect of interest reads *uninformative* that often."""
    from scipy.stats import chi2

    return float(chi2.sf(n - 1, n - 1))


def adjusted(p_values: list[float], alpha: float = 1 - CONFIDENCE) -> tuple[list[bool], list[bool]]:
    """Which of a family's tests stay significant at ``alpha`` after adjusting for their number: (Holm's
    step-down, which bounds the family-wise error; Benjamini-Hochberg's step-up, which bounds the false
    discovery rate). One entry per p value, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    holm, bh = [False] * m, [False] * m
    for rank, i in enumerate(order):  # Holm: reject in order while p_(k) <= alpha / (m - k)
        if p_values[i] > alpha / (m - rank):
            break
        holm[i] = True
    passing = [rank for rank, i in enumerate(order) if p_values[i] <= alpha * (rank + 1) / m]
    for rank, i in enumerate(order):  # BH: reject every p up to the largest p_(k) <= k alpha / m
        bh[i] = bool(passing) and rank <= passing[-1]
    return holm, bh
