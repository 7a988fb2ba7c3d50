"""Attention kernels for the Sparse Transformer patterns.

``attend(q, k, v, pattern, stride, c, combine=..., impl=...)`` with q, k (B, H, n, dk), v (B, H, n, dv)
returns (B, H, n, dv). ``pattern`` is a full pattern (dense | strided | fixed) or one half of a
factorisation (local | stride | block | summary, used by ``interleaved`` layers). ``combine`` matters
only for full sparse patterns: ``merged`` = union in one softmax on every head, ``multihead`` = the
first half of the heads attend with the first half of the factorisation, the rest with the second.
Head h of a group that uses summary keys takes the h-th c-sub-block from the end of each block.

Implementations: ``masked`` (dense masked reference, n x n, small n only), ``blocked`` (CPU/any
device, never n x n), ``flex`` (CUDA FlexAttention with block masks), ``auto`` (flex on CUDA, blocked
elsewhere). ``dense`` is causal ``scaled_dot_product_attention`` unless ``impl == "masked"``.
Half-precision inputs are computed in float32 by the blocked kernel and cast back.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from repro.models import patterns as P
from repro.models.kernels.blocked import blocked_attention
from repro.models.kernels.reference import masked_attention, pattern_mask

IMPLS = ("auto", "blocked", "flex", "masked")


def resolve_impl(impl: str, device: torch.device) -> str:
    if impl not in IMPLS:
        raise ValueError(f"unknown attention impl {impl!r}; expected one of {IMPLS}")
    if impl == "auto":
        if device.type != "cuda":
            return "blocked"
        from repro.models.kernels import flex

        return "flex" if flex.available() else "blocked"
    return impl


def _one(q, k, v, pattern, stride, c, impl, scale):
    if impl == "masked":
        mask = pattern_mask(pattern, q.shape[2], stride, c, q.shape[1], "merged", q.device)
        return masked_attention(q, k, v, mask, scale)
    if pattern == "dense":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    if impl == "flex":
        from repro.models.kernels import flex

        return flex.flex_attention_pattern(q, k, v, pattern, stride, c, scale)
    dtype = q.dtype
    if dtype in (torch.float16, torch.bfloat16):
        q, k, v = q.float(), k.float(), v.float()
    return blocked_attention(q, k, v, pattern, stride, c, scale).to(dtype)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pattern: str, stride: int | None = None,
           c: int | None = None, *, combine: str = "merged", impl: str = "auto",
           scale: float | None = None) -> torch.Tensor:
    if pattern not in P.ALL_NAMES:
        raise ValueError(f"unknown pattern {pattern!r}; expected one of {P.ALL_NAMES}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    impl = resolve_impl(impl, q.device)
    if combine == "multihead" and pattern in ("strided", "fixed"):
        H = q.shape[1]
        if H < 2:
            raise ValueError("combine='multihead' needs at least 2 heads")
        h1 = (H + 1) // 2
        a, b = P.HALVES[pattern]
        return torch.cat([_one(q[:, :h1], k[:, :h1], v[:, :h1], a, stride, c, impl, scale),
                          _one(q[:, h1:], k[:, h1:], v[:, h1:], b, stride, c, impl, scale)], dim=1)
    return _one(q, k, v, pattern, stride, c, impl, scale)


def reference(q, k, v, pattern, stride=None, c=None, *, combine="merged", scale=None):
    """Dense masked attention on exactly the mask ``attend`` implements (tests)."""
    mask = pattern_mask(pattern, q.shape[2], stride, c, q.shape[1], combine, q.device)
    return masked_attention(q, k, v, mask, scale)
