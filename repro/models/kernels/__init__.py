"""Attention kernels for the Sparse Transformer patterns.

``attend(q, k, v, pattern, stride, c, combine=..., impl=...)`` with q, k (B, H, n, dk), v (B, H, n, dv)
returns (B, H, n, dv). ``pattern`` is a full pattern (dense | strided | fixed) or one half of a
factorisation (local | stride | block | summary, used by ``interleaved`` layers). The heads of a layer
follow :func:`repro.models.patterns.head_groups` (``merged``: the pattern on every head, one softmax over
its union; ``multihead``: the first half of the heads on the first half of the factorisation), and each
group computes the parts of :data:`repro.models.patterns.PARTS`.

Implementations: ``blocked`` (CPU: every part dense in its layout through the fused CPU flash kernel,
merged by log-sum-exp), ``flex`` (CUDA FlexAttention, one call per coordinate system), ``masked`` (dense
masked reference, n x n, small n only), ``auto`` (flex on CUDA, blocked elsewhere). A group whose only
part is the causal triangle (``dense``) is causal ``scaled_dot_product_attention`` unless ``impl == "masked"``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from repro.models import patterns as P
from repro.models.kernels.blocked import blocked_attention
from repro.models.kernels.plan import plan
from repro.models.kernels.reference import masked_attention, pattern_mask

IMPLS = ("auto", "blocked", "flex", "masked")


def resolve_impl(impl: str, device: torch.device) -> str:
    if impl not in IMPLS:
        raise ValueError(f"unknown attention impl {impl!r}; expected one of {IMPLS}")
    if impl == "auto":
        return "flex" if device.type == "cuda" else "blocked"
    return impl


def _is_causal(pattern: str, stride, c, ranks) -> bool:
    ps = P.parts(pattern)
    return (
        len(ps) == 1 and ps[0].layout == "causal" and plan(ps[0], pattern, stride, c, tuple(ranks), 1).kind == "causal"
    )


def _group(q, k, v, pattern, stride, c, ranks, impl, scale):
    if _is_causal(pattern, stride, c, ranks):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    if impl == "flex":  # imported here: FlexAttention pulls in torch._dynamo, seconds a process on a CPU
        from repro.models.kernels import flex

        return flex.flex_attention_pattern(q, k, v, pattern, stride, c, ranks, scale)
    return blocked_attention(q, k, v, pattern, stride, c, ranks, scale)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pattern: str,
    stride: int | None = None,
    c: int | None = None,
    *,
    combine: str = "merged",
    impl: str = "auto",
    scale: float | None = None,
) -> torch.Tensor:
    if pattern not in P.ALL_NAMES:
        raise ValueError(f"unknown pattern {pattern!r}; expected one of {P.ALL_NAMES}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    impl = resolve_impl(impl, q.device)
    if impl == "masked":
        return reference(q, k, v, pattern, stride, c, combine=combine, scale=scale)
    outs = [
        _group(q[:, hs], k[:, hs], v[:, hs], p, stride, c, ranks, impl, scale)
        for p, hs, ranks in P.head_groups(pattern, combine, q.shape[1])
    ]
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)


def reference(q, k, v, pattern, stride=None, c=None, *, combine="merged", scale=None):
    """Dense masked attention on exactly the mask ``attend`` implements (tests)."""
    mask = pattern_mask(pattern, q.shape[2], stride, c, q.shape[1], combine, q.device)
    return masked_attention(q, k, v, mask, scale)
