"""CUDA path: FlexAttention with block masks (torch.nn.attention.flex_attention), reading the parts table.

The parts of a pattern (:data:`repro.models.patterns.PARTS`) run in three coordinate systems, one
FlexAttention call each, whose mask function is the union of its parts' predicates evaluated at the
original positions, so zero tiles (128 x 128) are skipped:

* natural order: the ``own`` and ``previous`` parts (block diagonal, or a band of width l);
* residue-major order (position a*l + r at r*nb + a): the ``residue`` part, causal attention inside
  contiguous segments of nb positions (in natural order it would touch every tile);
* gathered keys: the ``earlier`` part attends to each head's summary columns of every block, gathered
  into nb*c' keys (the plan's offsets), a staircase of tiles.

The calls merge in one softmax through their log-sum-exps (FlexAttention differentiates through the
returned lse), in float32. Half-precision inputs stay half in the kernels (fp32 accumulation). Forward
works on CPU too (eager, no grad: the CPU tests check the masks); backward needs CUDA.
"""

from __future__ import annotations

import math

import torch
import torch._dynamo.config as dynamo_config
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

from repro.models import patterns as P
from repro.models.kernels.plan import plan

BLOCK_SIZE = 128
_COMPILED = None
_MASKS: dict = {}


def _flex_fn(device: torch.device):
    global _COMPILED
    if device.type != "cuda":
        return flex_attention
    if _COMPILED is None:
        # one graph per (coordinate system, shape); the default limit of 8 would silently fall back to
        # eager FlexAttention, which materialises the scores
        for name in ("cache_size_limit", "recompile_limit"):
            if hasattr(dynamo_config, name):
                setattr(dynamo_config, name, max(64, getattr(dynamo_config, name)))
        _COMPILED = torch.compile(flex_attention, dynamic=False)
    return _COMPILED


def _block_mask(key, mask_mod, H, q_len, kv_len, device):
    key = (*key, H, q_len, kv_len, str(device))
    if key not in _MASKS:
        _MASKS[key] = create_block_mask(
            mask_mod, B=None, H=H, Q_LEN=q_len, KV_LEN=kv_len, device=device, BLOCK_SIZE=BLOCK_SIZE
        )
    return _MASKS[key]


def _call(q, k, v, block_mask, scale):
    o, aux = _flex_fn(q.device)(q, k, v, block_mask=block_mask, scale=scale, return_aux=AuxRequest(lse=True))
    return o, aux.lse


class _Group:
    """The head group's geometry on the device: ``g(h)`` is head h's :class:`~repro.models.patterns.Geometry`."""

    def __init__(self, pattern, l, c, ranks, device):
        self.pattern, self.l, self.c, self.ranks = pattern, l, c, tuple(ranks)
        g = P.geometry(pattern, l, c, self.ranks)
        self.lo = None if g.lo is None else torch.as_tensor(g.lo.reshape(-1), device=device)
        self.key = (pattern, l, c, self.ranks)

    def g(self, h):
        return P.Geometry(self.l, self.c, None if self.lo is None else self.lo[h])


def _natural(q, k, v, group, ps, scale):
    def mm(b, h, qi, ki):
        return P.union_of(ps, qi, ki, group.g(h))

    n = q.shape[2]
    return _call(q, k, v, _block_mask(("natural", group.key, ps), mm, q.shape[1], n, n, q.device), scale)


def _residue(q, k, v, group, ps, scale):
    B, H, n, _ = q.shape
    l, nb = group.l, n // group.l

    def pos(p):  # residue-major index -> original position
        return (p % nb) * l + p // nb

    def mm(b, h, qi, ki):
        return P.union_of(ps, pos(qi), pos(ki), group.g(h))

    rm = lambda t: t.view(B, H, nb, l, t.shape[-1]).transpose(2, 3).reshape(B, H, n, t.shape[-1])  # noqa: E731
    o, lse = _call(rm(q), rm(k), rm(v), _block_mask(("residue", group.key, ps), mm, H, n, n, q.device), scale)
    return (
        o.view(B, H, l, nb, -1).transpose(2, 3).reshape(B, H, n, -1),
        lse.view(B, H, l, nb).transpose(2, 3).reshape(B, H, n),
    )


def _earlier(q, k, v, group, part, scale):
    B, H, n, _ = q.shape
    l, nb = group.l, n // group.l
    offs = torch.as_tensor(plan(part, group.pattern, l, group.c, group.ranks, nb).offsets, device=q.device)
    cc = offs.shape[1]
    pos = (torch.arange(nb, device=q.device)[:, None] * l + offs[:, None, :]).reshape(H, nb * cc)  # (H, K)
    ks, vs = (torch.gather(t, 2, pos[None, :, :, None].expand(B, H, nb * cc, t.shape[-1])) for t in (k, v))

    def mm(b, h, qi, ki):
        return part.mask(qi, pos[h, ki], group.g(h))

    return _call(q, ks, vs, _block_mask(("earlier", group.key, part), mm, H, n, nb * cc, q.device), scale)


def flex_attention_pattern(
    q, k, v, pattern: str, stride: int, c: int | None = None, ranks=None, scale: float | None = None
):
    """Sparse attention of one head group with FlexAttention (same contract as ``blocked_attention``)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    n, l = q.shape[2], stride
    pad = (-n) % l
    if pad:
        q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    ranks = list(range(q.shape[1])) if ranks is None else list(ranks)
    group = _Group(pattern, l, c, ranks, q.device)
    live = [p for p in P.parts(pattern) if plan(p, pattern, l, c, tuple(ranks), q.shape[2] // l).kind != "empty"]
    for p in live:
        if p.layout not in ("own", "previous", "residue", "earlier"):
            raise ValueError(f"flex has no coordinates for layout {p.layout!r} (part {p} of {pattern!r})")
    calls = []
    natural = tuple(p for p in live if p.layout in ("own", "previous"))
    if natural:
        calls.append(_natural(q, k, v, group, natural, scale))
    residue = tuple(p for p in live if p.layout == "residue")
    if residue:
        calls.append(_residue(q, k, v, group, residue, scale))
    calls += [_earlier(q, k, v, group, p, scale) for p in live if p.layout == "earlier"]
    if len(calls) == 1:
        o = calls[0][0]  # rows without keys: FlexAttention returns 0 there
    else:
        lses = torch.stack([lp.float() for _, lp in calls])
        tot = torch.logsumexp(lses, dim=0)
        tot = tot.masked_fill(tot.isneginf(), 0.0)
        o = sum(torch.exp(lp - tot).unsqueeze(-1) * op.float() for (op, _), lp in zip(calls, lses)).to(q.dtype)
    return o[:, :, :n] if pad else o
