"""What a layout can reach: the scores the pattern allows against the scores the CPU kernels compute.

A fused CPU flash-attention call (``aten::_scaled_dot_product_flash_attention_for_cpu``, torch 2.13)
walks its queries in blocks of 32, 64 or 256 rows (fewer than 192 query rows, fewer than 768, more) and
its keys in blocks of :data:`KV_SPLIT`; a causal call skips only whole key blocks beyond the query
block's last row, so a causal tile of at most 512 keys costs as much as a full one (:func:`call_scores`).
:func:`counted` runs the blocked kernel's forward once and adds up every call's computed scores; with
the pattern's allowed keys per query (``repro.models.patterns``) and dense causal SDPA's own computed
scores that gives each layout's ceiling: the speed-up over dense it would reach at dense's cost per
computed score (:func:`ceiling`). Small tiles cost more per score than dense's large ones
(docs/kernels.md measures it), so a measured speed-up stays below its ceiling.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch

from repro.models import patterns as P

KV_SPLIT = 512


def _q_split(rows: int) -> int:
    return 256 if rows >= 768 else 64 if rows >= 192 else 32


def call_scores(rows: int, keys: int, causal: bool) -> int:
    """Scores one (batch, head) problem of a fused call computes: ``rows`` x ``keys``, less the key
    blocks a causal call skips."""
    if not causal:
        return rows * keys
    split, total = _q_split(rows), 0
    for m in range(0, rows, split):
        block = min(split, rows - m)
        total += block * min(keys, math.ceil(min(m + block, keys) / KV_SPLIT) * KV_SPLIT)
    return total


@contextlib.contextmanager
def counted() -> Iterator[dict]:
    """Inside: every forward call of the blocked kernel adds its computed scores to ``["scores"]`` (the
    few-block residue path, which computes by offsets, its exact triangle)."""
    from repro.models.kernels import blocked

    found = {"scores": 0}
    fused, offsets = blocked._FWD, blocked._Residues._few_first

    def count(q, k, v, dropout, causal, *args, **kwargs):
        found["scores"] += q.shape[0] * q.shape[1] * call_scores(q.shape[-2], k.shape[-2], causal)
        return fused(q, k, v, dropout, causal, *args, **kwargs)

    def count_offsets(run, q, k, v, scale):
        nb = q.shape[1] // run.l
        found["scores"] += q.shape[0] * run.l * nb * (nb + 1) // 2
        return offsets(run, q, k, v, scale)

    blocked._FWD, blocked._Residues._few_first = count, count_offsets
    try:
        yield found
    finally:
        blocked._FWD, blocked._Residues._few_first = fused, offsets


def ceiling(pattern: str, n: int, stride: int, c: int | None, heads: int, combine: str = "merged") -> dict:
    """Per query, averaged over positions and heads: ``allowed_keys`` (the pattern's), ``computed_keys``
    (the blocked kernel's, forward), ``dense_computed_keys`` (causal SDPA's) and ``ceiling_vs_dense``
    (dense's computed over the pattern's: the speed-up at dense's cost per score)."""
    from repro.models.kernels import attend

    dense = call_scores(n, n, True) / n
    q = torch.zeros(1, heads, n, 2)
    with counted() as found, torch.no_grad():
        attend(q, q, q, pattern, stride, c, combine=combine, impl="blocked")
    computed = found["scores"] / (heads * n) if pattern != "dense" else dense
    return {
        "allowed_keys": P.layer_keys(pattern, combine, heads, n, stride, c),
        "computed_keys": computed,
        "dense_computed_keys": dense,
        "ceiling_vs_dense": dense / computed,
    }
