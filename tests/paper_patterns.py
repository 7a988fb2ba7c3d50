"""The Sparse Transformer's patterns written out from the paper's sets, for query i and key j, and
dense attention under such a mask: the definition the pattern tables and every kernel are tested against.
Nothing here imports repro, so a change to repro's predicates, parts or plans cannot change it.

The paper (Child et al. 2019, section 4.3), every set causal (j <= i):

* strided: A1 = {t, ..., i} with t = max(0, i - l); A2 = {j : (i - j) mod l = 0};
* fixed:   A1 = {j : floor(j / l) = floor(i / l)}; A2 = {j : j mod l in {t, ..., l}} with t = l - c
  (j mod l < l, so the last c positions of every block);
* heads "attend to distinct sub-blocks of length c within the block of size l".

The project's documented choices (repro/models/patterns.py's docstring, docs/kernels.md), taken as
parameters here so each is visible:

* ``local_keys``: the local half holds the last l keys (OpenAI's code: i - j < l), where the paper's A1
  holds l + 1 (t = i - l). The strided union is the same either way (key i - l is in A2); the local half
  alone, used by ``interleaved`` and ``multihead`` layers, differs.
* summary rank h takes the h-th sub-block of c positions counted from the block's end, h wrapping
  modulo l // c; under ``multihead`` a head's rank is its index among the heads of its half.
* ``merged``: every head attends to the union A1 | A2; ``multihead``: the first ceil(H / 2) heads to
  A1, the others to A2.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

HALVES = {"strided": ("local", "stride"), "fixed": ("block", "summary")}


def attends(pattern: str, i, j, l: int | None, c: int | None, rank: int, local_keys: int | None):
    """May query i attend to key j under ``pattern`` (a full pattern or one half)? i and j are integers
    or integer arrays (broadcasting)."""
    if pattern in HALVES:
        first, second = HALVES[pattern]
        return attends(first, i, j, l, c, rank, local_keys) | attends(second, i, j, l, c, rank, local_keys)
    causal = j <= i
    if pattern == "dense":
        return causal
    if pattern == "local":
        return causal & (i - j < local_keys)
    if pattern == "stride":
        return causal & ((i - j) % l == 0)
    if pattern == "block":
        return causal & (j // l == i // l)
    if pattern == "summary":
        sub = rank % (l // c)  # the sub-block, counted from the block's end
        return causal & (l - (sub + 1) * c <= j % l) & (j % l <= l - sub * c - 1)
    raise ValueError(pattern)


@functools.cache
def mask(pattern: str, n: int, l: int | None, c: int | None = None, rank: int = 0, local_keys: int | None = None):
    """(n, n) bool: the pattern of one head (read-only: cached)."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    m = np.broadcast_to(attends(pattern, i, j, l, c, rank, l if local_keys is None else local_keys), (n, n)).copy()
    m.setflags(write=False)
    return m


def heads(pattern: str, combine: str, H: int) -> list[tuple[str, int]]:
    """(pattern, summary rank) of each of the H heads of a layer."""
    if combine == "multihead" and pattern in HALVES:
        first, second = HALVES[pattern]
        h1 = -(-H // 2)
        return [(first, h) for h in range(h1)] + [(second, h) for h in range(H - h1)]
    return [(pattern, h) for h in range(H)]


def layer_mask(pattern: str, combine: str, n: int, l: int | None, c: int | None, H: int) -> np.ndarray:
    """(H, n, n) bool: every head's pattern."""
    return np.stack([mask(p, n, l, c, rank) for p, rank in heads(pattern, combine, H)])


def attention(q, k, v, allowed: np.ndarray, scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v over the allowed keys of each query ((H, n, n) or (n, n)); a query
    with no allowed key gets zeros."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    m = torch.as_tensor(np.array(allowed), device=q.device)
    s = (q @ k.transpose(-1, -2)) * scale
    w = torch.exp(s - s.masked_fill(~m, -torch.inf).amax(-1, keepdim=True).detach().nan_to_num(0.0, 0.0, 0.0)) * m
    total = w.sum(-1, keepdim=True)
    return w / torch.where(total > 0, total, 1.0) @ v
