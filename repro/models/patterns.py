"""Sparse Transformer attention patterns as small pure functions (numpy, row = query i, column = key j).

Semantics follow the paper (Child et al. 2019, section 4) and OpenAI's reference code:

* every pattern is causal (``j <= i``);
* ``strided`` = ``local`` (``i - l < j <= i``) union ``stride`` (``(i - j) mod l == 0``);
* ``fixed`` = ``block`` (``j // l == i // l``) union ``summary`` (``j mod l`` in the head's c-sub-block);
  head ``h`` uses the h-th c-sub-block from the end of each block, ``[l-(h+1)c, l-hc)``, wrapping
  modulo ``l // c`` sub-blocks when there are more heads than sub-blocks;
* ``dense`` = causal.

``local``, ``stride``, ``block`` and ``summary`` are the halves of the two factorisations, used one per
residual block by the ``interleaved`` combination. These functions build n x n matrices: they are for
tests, pictures (Figure 3) and the validity checker, never for the kernels.
"""
from __future__ import annotations

import numpy as np

PATTERNS = ("dense", "strided", "fixed")
HALVES = {"dense": ("dense",), "strided": ("local", "stride"), "fixed": ("block", "summary")}
ALL_NAMES = ("dense", "strided", "fixed", "local", "stride", "block", "summary")
COMBINES = ("interleaved", "merged", "multihead")


def summary_offsets(stride: int, c: int, head: int = 0) -> tuple[int, int]:
    """Offsets ``[lo, hi)`` within a block of length ``stride`` that head ``head`` uses as summary keys."""
    if c is None or c < 1 or c > stride:
        raise ValueError(f"fixed pattern needs 1 <= c <= stride, got c={c}, stride={stride}")
    sub = head % (stride // c)
    return stride - (sub + 1) * c, stride - sub * c


def _rule(pattern: str, i: np.ndarray, j: np.ndarray, stride: int, c: int | None, head: int) -> np.ndarray:
    """The pattern's predicate on broadcastable integer arrays of query ``i`` and key ``j`` positions."""
    causal = j <= i
    if pattern == "dense":
        return causal
    if pattern not in ALL_NAMES:
        raise ValueError(f"unknown pattern {pattern!r}; expected one of {ALL_NAMES}")
    l = stride
    if l is None or l < 1:
        raise ValueError(f"pattern {pattern!r} needs a stride >= 1, got {stride}")
    if pattern in ("local", "strided"):
        local = (i - j) < l
        if pattern == "local":
            return causal & local
    if pattern in ("stride", "strided"):
        strd = (i - j) % l == 0
        if pattern == "stride":
            return causal & strd
        return causal & (local | strd)
    if pattern in ("block", "fixed"):
        block = (j // l) == (i // l)
        if pattern == "block":
            return causal & block
    lo, hi = summary_offsets(l, c, head)
    summ = ((j % l) >= lo) & ((j % l) < hi)
    if pattern == "summary":
        return causal & summ
    return causal & (block | summ)


def allowed(pattern: str, n: int, stride: int, c: int | None = None, head: int = 0) -> np.ndarray:
    """Boolean (n, n) matrix: may query ``i`` attend to key ``j`` under ``pattern``?

    A query with no allowed key (possible only for the ``summary`` half alone) gets a zero output
    from every kernel."""
    return _rule(pattern, np.arange(n)[:, None], np.arange(n)[None, :], stride, c, head)


def allowed_row(pattern: str, i: int, stride: int, c: int | None = None, head: int = 0) -> np.ndarray:
    """Row ``i`` of :func:`allowed` restricted to keys ``0..i`` (for incremental decoding)."""
    return _rule(pattern, np.asarray(i), np.arange(i + 1), stride, c, head)


def layer_patterns(pattern: str, combine: str, layers: int) -> list[str]:
    """The pattern each residual block uses (``interleaved`` alternates the halves; others use ``pattern``)."""
    if pattern == "dense" or combine != "interleaved":
        return [pattern] * layers
    halves = HALVES[pattern]
    return [halves[r % len(halves)] for r in range(layers)]


def head_patterns(pattern: str, combine: str, heads: int) -> list[str]:
    """The pattern each head of a layer uses: ``multihead`` puts the first half of the heads on the
    first half of the factorisation and the rest on the second; other modes use ``pattern`` on every head."""
    if combine != "multihead" or pattern not in ("strided", "fixed"):
        return [pattern] * heads
    a, b = HALVES[pattern]
    return [a if h < (heads + 1) // 2 else b for h in range(heads)]


def layer_mask(pattern: str, n: int, stride: int, c: int | None, heads: int, combine: str) -> np.ndarray:
    """(heads, n, n) masks of one layer using ``pattern`` (a full pattern or a half) under ``combine``."""
    per_head = head_patterns(pattern, combine, heads) if pattern in PATTERNS else [pattern] * heads
    return np.stack([allowed(p, n, stride, c, head=h) for h, p in zip(summary_heads(per_head), per_head)])


def summary_heads(per_head: list[str]) -> list[int]:
    """Summary sub-block index of each head: its rank among the heads of the layer that share its
    pattern (so under ``multihead`` the first summary head still covers the last c positions)."""
    seen: dict[str, int] = {}
    out = []
    for p in per_head:
        out.append(seen.get(p, 0))
        seen[p] = out[-1] + 1
    return out


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


def check_valid(pattern: str, n: int, stride: int, c: int | None = None, combine: str = "interleaved",
                heads: int = 2, steps: int | None = None) -> bool:
    """True iff every key ``j <= i`` reaches query ``i`` within ``steps`` layers (default: the number of
    halves of the factorisation, p = 2, or 1 for dense)."""
    steps = steps if steps is not None else len(HALVES[pattern])
    pats = layer_patterns(pattern, combine, steps)
    masks = [layer_mask(p, n, stride, c, heads, combine) for p in pats]
    reach = connectivity(masks)
    return bool(np.all(reach[np.tril_indices(n)]))


def figure3(n: int = 36, stride: int = 6, c: int = 1) -> dict[str, dict[str, np.ndarray]]:
    """Figure 3 of the paper: for dense, strided and fixed, the (n, n) attention matrix of each half
    and of the union, and the 2-layer connectivity (interleaved halves)."""
    out = {}
    for p in PATTERNS:
        halves = {h: allowed(h, n, stride, c) for h in HALVES[p]}
        out[p] = {"union": allowed(p, n, stride, c), **halves,
                  "connectivity": connectivity(list(halves.values()))}
    return out


def keys_per_query(pattern: str, n: int, stride: int | None, c: int | None = None, head: int = 0) -> np.ndarray:
    """Number of allowed keys of each query 0..n-1 (closed form, O(n); equals ``allowed(...).sum(1)``)."""
    i = np.arange(n)
    l = stride
    if pattern == "dense":
        return i + 1
    if pattern == "local":
        return np.minimum(i + 1, l)
    if pattern == "stride":
        return i // l + 1
    if pattern == "strided":
        return np.minimum(i + 1, l) + i // l  # the two halves share only j = i
    if pattern == "block":
        return i % l + 1
    if pattern in ("summary", "fixed"):
        lo, hi = summary_offsets(l, c, head)
        if pattern == "fixed":
            return i % l + 1 + (i // l) * c
        return (i // l) * c + np.clip(i % l - lo + 1, 0, c)
    raise ValueError(f"unknown pattern {pattern!r}; expected one of {ALL_NAMES}")


def mean_keys(pattern: str, n: int, stride: int | None, c: int | None = None, head: int = 0) -> float:
    """Allowed keys per query averaged over the n positions of a block."""
    return float(keys_per_query(pattern, n, stride, c, head).mean())
