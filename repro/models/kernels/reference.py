"""Dense masked attention over a pattern's (heads, n, n) mask: the reference every kernel is tested
against (and the ``masked`` implementation). Builds n x n tensors, so only for small n."""

from __future__ import annotations

import math

import numpy as np
import torch

from repro.models import patterns as P


def pattern_mask(
    pattern: str,
    n: int,
    stride: int | None,
    c: int | None,
    heads: int,
    combine: str = "merged",
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """(heads, n, n) bool mask of ``pattern`` (a full pattern or a half) under ``combine``."""
    return torch.from_numpy(np.ascontiguousarray(P.layer_mask(pattern, n, stride, c, heads, combine))).to(device)


def masked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    """softmax(q k^T * scale, masked) v with q, k (B, H, n, dk), v (B, H, n, dv), mask broadcastable to
    (B, H, n, n). Rows without any allowed key give zeros."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~mask, float("-inf"))
    empty = ~mask.any(-1, keepdim=True)
    p = torch.softmax(s.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    return p @ v
