"""Seeds added by design: a scale's *looks* and the group-sequential boundary a verdict at one of them uses.

A scale that declares ``seeds: {first: 3, max: 8}`` (every seed count from 3 to 8 is a look) or ``seeds:
{looks: [3, 5, 8]}`` may add seeds while a claim has not yet been decided; a plain ``seeds: 3`` is one look.
Judging after each added seed at the fixed 5% level is optional stopping: under no effect, "add a seed
while it has not passed" at looks 3, 4, 5 reads a false *reproduced* several times as often as the
nominal rate (tests/spine/test_spine_sequential.py measures it). So a verdict at look k of K spends only
part of the error, by a **Pocock-type Lan-DeMets spending function** over the information fractions
t_k = n_k / n_K (seeds at the look over seeds at the last one):

    alpha(t) = alpha · ln(1 + (e - 1) · t)

(Lan & DeMets 1983, Biometrika 70:659; the Pocock-type form of Kim & DeMets 1987). The boundary c_k of the
paired t statistic at each look is the value that the null's t, not stopped at an earlier look, exceeds
with probability alpha(t_k) - alpha(t_{k-1}): found by Monte Carlo with a fixed seed (:data:`DRAWS`
standard normal margins per look set, :data:`SEED`; the t statistic is scale-free, so a normal margin of
any sd gives the same boundaries), deterministic and cached per look set. A look's boundary is stated as
its *nominal one-sided level* alpha_k = P(T_{n_k - 1} > c_k): the verdict at that look is the ordinary
rule at confidence 1 - alpha_k, per direction (reproduced above, not reproduced below).

Seeds stored beyond the last look are not judged (the first n_K are); seeds short of the first look are
judged at the first look's level (the smallest).
"""

from __future__ import annotations

import math
from functools import lru_cache

from repro.claims.stats import CONFIDENCE
from repro.config.looks import Looks

DRAWS = 400_000  # Monte Carlo draws per look set: the spending's Monte Carlo error is about 0.0003 at 5%
SEED = 60  # the boundaries' fixed seed (same looks, same boundaries, same bytes)


def spent(t: float, alpha: float) -> float:
    """The Pocock-type spending function: the error spent by information fraction ``t``."""
    return alpha * math.log(1 + (math.e - 1) * t)


@lru_cache(maxsize=64)
def levels(counts: tuple[int, ...], alpha: float = 1 - CONFIDENCE) -> tuple[float, ...]:
    """The nominal one-sided level alpha_k of each look (module docstring); one look: ``alpha`` itself."""
    import numpy as np  # inside: the config stage imports this module, and judging alone needs numpy
    from scipy.special import stdtr

    if len(counts) == 1:
        return (alpha,)
    rng = np.random.default_rng(SEED)
    margins = rng.standard_normal((DRAWS, counts[-1]))
    alive = np.ones(DRAWS, dtype=bool)
    out, before = [], 0.0
    for n in counts:
        x = margins[:, :n]
        t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / math.sqrt(n))
        now = spent(n / counts[-1], alpha)
        crossing = int(round((now - before) * DRAWS))  # the draws this look may stop
        survivors = np.sort(t[alive])[::-1]
        c = float(survivors[crossing - 1] + survivors[crossing]) / 2 if crossing > 0 else float(survivors[0]) + 1
        alive &= t <= c
        out.append(float(1 - stdtr(n - 1, c)))
        before = now
    return tuple(out)


def level(looks: Looks, seeds: int, alpha: float = 1 - CONFIDENCE) -> float:
    """The nominal one-sided level at the look ``seeds`` reach."""
    return levels(looks.counts, alpha)[looks.reached(seeds)]
