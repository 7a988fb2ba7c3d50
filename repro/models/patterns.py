"""Sparse Transformer attention patterns: one predicate per half, one table of parts per pattern.

Semantics follow the paper (Child et al. 2019, section 4) and OpenAI's reference code. A *predicate*
takes query positions ``i``, key positions ``j`` (integer numpy arrays or torch tensors, broadcasting,
in the style of attention-gym's mask functions) and a :class:`Geometry`; every half is causal:

* ``local``:   ``i - l < j <= i``: the last l keys, the query's own included, as OpenAI's reference code
  (``i - j < l``). The paper's A(1) (section 4.3) is {t, ..., i} with t = max(0, i - l), which holds
  l + 1 keys. The ``strided`` union is the same either way (key i - l lies in the stride half); the
  local half alone, which ``interleaved`` and ``multihead`` layers use, holds one key fewer than the
  paper's A(1) (tests/paper_patterns.py writes the paper's sets with this as a parameter);
* ``stride``:  ``(i - j) mod l == 0``;
* ``block``:   ``j // l == i // l``;
* ``summary``: ``j mod l`` in the head's c-sub-block ``[lo, lo + c)``, ``lo = l - (rank + 1) c``
  (``rank`` wraps modulo ``l // c``: see :func:`summary_offsets`);
* ``dense``:   causal.

``strided`` = local | stride and ``fixed`` = block | summary (:data:`HALVES`). :data:`PARTS` splits every
pattern and half into disjoint *parts*, each a half restricted to a *layout*, the region a kernel
computes densely (:data:`LAYOUTS`: the query's own block, the previous block, the query's residue class,
the summary columns of earlier blocks, or the whole causal triangle). Every kernel, :func:`allowed`, the
figures and sampling read this table; nothing else defines a pattern. :func:`layer_heads` is the
table of combinations: which pattern (and summary rank) each head of a layer uses.

Every predicate is invariant under shifting ``i`` and ``j`` together by ``l`` (kernels and
:func:`keys_per_query` rely on it; the tests check it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

PATTERNS = ("dense", "strided", "fixed")
HALVES = {"dense": ("dense",), "strided": ("local", "stride"), "fixed": ("block", "summary")}
ALL_NAMES = ("dense", "strided", "fixed", "local", "stride", "block", "summary")
COMBINES = ("interleaved", "merged", "multihead")


@dataclass(frozen=True, eq=False)
class Geometry:
    """What predicates need besides positions: the stride / block length ``l``, the summary width ``c``
    and the head's first summary offset ``lo`` (an int, or an array broadcasting against the positions)."""

    l: int | None = None
    c: int | None = None
    lo: Any = None


# -- the halves ------------------------------------------------------------------------------------


def dense(i, j, g: Geometry):
    return j <= i


def local(i, j, g: Geometry):
    return (j <= i) & (i - j < g.l)


def stride(i, j, g: Geometry):
    return (j <= i) & ((i - j) % g.l == 0)


def block(i, j, g: Geometry):
    return (j <= i) & (i // g.l == j // g.l)


def summary(i, j, g: Geometry):
    return (j <= i) & (j % g.l >= g.lo) & (j % g.l < g.lo + g.c)


HALF: dict[str, Callable] = {"dense": dense, "local": local, "stride": stride, "block": block, "summary": summary}

# -- the layouts kernels compute densely -----------------------------------------------------------

LAYOUTS: dict[str, Callable] = {
    "causal": lambda i, j, g: j <= i,  # the whole causal triangle
    "own": lambda i, j, g: i // g.l == j // g.l,  # the query's own block (block diagonal)
    "previous": lambda i, j, g: i // g.l == j // g.l + 1,  # the block before the query's
    "residue": lambda i, j, g: (i - j) % g.l == 0,  # the query's residue class mod l
    "earlier": lambda i, j, g: j // g.l < i // g.l,  # blocks before the query's (gathered columns)
}


@dataclass(frozen=True)
class Part:
    """The keys of ``half`` inside ``layout``, less those of ``minus`` (held by another part)."""

    layout: str
    half: str
    minus: str | None = None

    def mask(self, i, j, g: Geometry):
        m = LAYOUTS[self.layout](i, j, g) & HALF[self.half](i, j, g)
        return m if self.minus is None else m & ~HALF[self.minus](i, j, g)


PARTS: dict[str, tuple[Part, ...]] = {
    "dense": (Part("causal", "dense"),),
    "local": (Part("own", "local"), Part("previous", "local")),
    "stride": (Part("residue", "stride"),),
    "strided": (Part("own", "local", minus="stride"), Part("previous", "local"), Part("residue", "stride")),
    "block": (Part("own", "block"),),
    "summary": (Part("earlier", "summary"), Part("own", "summary")),
    "fixed": (Part("own", "block"), Part("earlier", "summary")),
}


def parts(pattern: str) -> tuple[Part, ...]:
    if pattern not in PARTS:
        raise ValueError(f"unknown pattern {pattern!r}; expected one of {ALL_NAMES}")
    return PARTS[pattern]


def uses_summary(pattern: str) -> bool:
    return any(p.half == "summary" for p in parts(pattern))


def summary_offsets(stride: int, c: int, head: int = 0) -> tuple[int, int]:
    """Offsets ``[lo, hi)`` within a block of length ``stride`` that summary rank ``head`` uses."""
    if c is None or c < 1 or stride is None or c > stride:
        raise ValueError(f"fixed pattern needs 1 <= c <= stride, got c={c}, stride={stride}")
    sub = head % (stride // c)
    return stride - (sub + 1) * c, stride - sub * c


def geometry(pattern: str, stride: int | None, c: int | None, ranks) -> Geometry:
    """The geometry of ``pattern`` for heads of the given summary ranks (an int, or a sequence: ``lo``
    is then an array over heads, shaped to broadcast against (heads, rows, cols) position arrays)."""
    if pattern != "dense" and (stride is None or stride < 1):
        raise ValueError(f"pattern {pattern!r} needs a stride >= 1, got {stride}")
    if not uses_summary(pattern):
        return Geometry(stride)
    if np.ndim(ranks) == 0:
        return Geometry(stride, c, summary_offsets(stride, c, int(ranks))[0])
    return Geometry(stride, c, np.array([summary_offsets(stride, c, r)[0] for r in ranks])[:, None, None])


def union_of(ps, i, j, g: Geometry):
    """The union of the parts ``ps``' predicates."""
    out = None
    for p in ps:
        m = p.mask(i, j, g)
        out = m if out is None else out | m
    return out


def union(pattern: str, i, j, g: Geometry):
    """The pattern's predicate: the union of its parts."""
    return union_of(parts(pattern), i, j, g)


# -- combinations ----------------------------------------------------------------------------------


def layer_patterns(pattern: str, combine: str, layers: int) -> list[str]:
    """The pattern each residual block uses (``interleaved`` alternates the halves; others use ``pattern``)."""
    if pattern == "dense" or combine != "interleaved":
        return [pattern] * layers
    halves = HALVES[pattern]
    return [halves[r % len(halves)] for r in range(layers)]


def layer_heads(pattern: str, combine: str, heads: int) -> list[tuple[str, int]]:
    """(pattern, summary rank) of each head of a layer using ``pattern`` (a full pattern or a half).

    ``multihead`` puts the first ceil(heads / 2) heads on the first half of the factorisation and the rest
    on the second; other combinations use ``pattern`` on every head. A head's rank is its index among the
    heads of its pattern (so under ``multihead`` the first summary head still covers the last c positions)."""
    if combine == "multihead" and pattern in ("strided", "fixed"):
        if heads < 2:
            raise ValueError("combine='multihead' needs at least 2 heads")
        a, b = HALVES[pattern]
        h1 = (heads + 1) // 2
        return [(a, h) for h in range(h1)] + [(b, h) for h in range(heads - h1)]
    return [(pattern, h) for h in range(heads)]


def head_groups(pattern: str, combine: str, heads: int) -> list[tuple[str, slice, list[int]]]:
    """Consecutive heads sharing a pattern: (pattern, head slice, summary ranks) per group."""
    out: list[tuple[str, slice, list[int]]] = []
    for h, (p, rank) in enumerate(layer_heads(pattern, combine, heads)):
        if out and out[-1][0] == p:
            out[-1] = (p, slice(out[-1][1].start, h + 1), out[-1][2] + [rank])
        else:
            out.append((p, slice(h, h + 1), [rank]))
    return out


# -- matrices and counts ---------------------------------------------------------------------------


def allowed(pattern: str, n: int, stride: int, c: int | None = None, head: int = 0) -> np.ndarray:
    """Boolean (n, n) matrix: may query ``i`` attend to key ``j`` under ``pattern`` (summary rank ``head``)?

    A query with no allowed key (possible only for the ``summary`` half alone) gets a zero output
    from every kernel."""
    return union(pattern, np.arange(n)[:, None], np.arange(n)[None, :], geometry(pattern, stride, c, head))


def allowed_row(pattern: str, i: int, stride: int, c: int | None = None, head: int = 0) -> np.ndarray:
    """Row ``i`` of :func:`allowed` restricted to keys ``0..i`` (for incremental decoding)."""
    return union(pattern, np.asarray(i), np.arange(i + 1), geometry(pattern, stride, c, head))


def layer_mask(pattern: str, n: int, stride: int, c: int | None, heads: int, combine: str) -> np.ndarray:
    """(heads, n, n) masks of one layer using ``pattern`` (a full pattern or a half) under ``combine``."""
    return np.stack([allowed(p, n, stride, c, rank) for p, rank in layer_heads(pattern, combine, heads)])


def keys_per_query(pattern: str, n: int, stride: int | None, c: int | None = None, head: int = 0) -> np.ndarray:
    """Number of allowed keys of each query 0..n-1, from the predicate in O(n l): by shift invariance
    query a*l + r sees, in the block d blocks back, as many keys as query d*l + r does in block 0."""
    g = geometry(pattern, stride, c, head)
    l = stride if pattern != "dense" else 1  # causal is invariant under any shift
    nb, step = -(-n // l), max(1, 2**20 // (l * l))
    per_block = np.concatenate(
        [
            union(pattern, np.arange(a * l, min(nb, a + step) * l)[:, None], np.arange(l)[None, :], g).sum(1)
            for a in range(0, nb, step)
        ]
    )
    return np.cumsum(per_block.reshape(nb, l), axis=0).reshape(-1)[:n]


def mean_keys(pattern: str, n: int, stride: int | None, c: int | None = None, head: int = 0) -> float:
    """Allowed keys per query averaged over the n positions of a block."""
    return float(keys_per_query(pattern, n, stride, c, head).mean())


def layer_keys(pattern: str, combine: str, heads: int, n: int, stride: int | None, c: int | None) -> float:
    """Allowed keys per query of one layer, averaged over its heads and the n positions."""
    return float(np.mean([mean_keys(p, n, stride, c, rank) for p, rank in layer_heads(pattern, combine, heads)]))


# -- connectivity and Figure 3 ---------------------------------------------------------------------


def connectivity(masks: list[np.ndarray]) -> np.ndarray:
    """Which inputs each output reaches through a stack of layers (earliest layer first).

    Each mask is (n, n) or (heads, n, n) (heads are unioned: information flows through any head).
    Returns ``R`` with ``R[i, j]`` true iff a path j -> ... -> i exists (a position always keeps its
    own residual stream, so paths may also stay put between layers)."""
    n = masks[0].shape[-1]
    reach = np.eye(n, dtype=bool)
    for m in masks:
        a = m.any(axis=0) if m.ndim == 3 else m
        a = a | np.eye(n, dtype=bool)  # residual connection
        reach = (a.astype(np.int64) @ reach.astype(np.int64)) > 0
    return reach


def check_valid(
    pattern: str,
    n: int,
    stride: int,
    c: int | None = None,
    combine: str = "interleaved",
    heads: int = 2,
    steps: int | None = None,
) -> bool:
    """True iff every key ``j <= i`` reaches query ``i`` within ``steps`` layers (default: the number of
    halves of the factorisation, p = 2, or 1 for dense)."""
    steps = steps if steps is not None else len(HALVES[pattern])
    masks = [layer_mask(p, n, stride, c, heads, combine) for p in layer_patterns(pattern, combine, steps)]
    reach = connectivity(masks)
    return bool(np.all(reach[np.tril_indices(n)]))


def figure3(n: int = 36, stride: int = 6, c: int = 1) -> dict[str, dict[str, np.ndarray]]:
    """Figure 3 of the paper: for dense, strided and fixed, the (n, n) attention matrix of each half
    and of the union, and the 2-layer connectivity (interleaved halves)."""
    out = {}
    for p in PATTERNS:
        halves = {h: allowed(h, n, stride, c) for h in HALVES[p]}
        out[p] = {"union": allowed(p, n, stride, c), **halves, "connectivity": connectivity(list(halves.values()))}
    return out
