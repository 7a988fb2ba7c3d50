"""CUDA path: FlexAttention with block masks (torch.nn.attention.flex_attention).

Each part of a pattern (see :mod:`repro.models.kernels.blocked`) runs as one FlexAttention call on a
layout in which the part is block-sparse at the kernel's 128 x 128 tile granularity, so zero tiles
are skipped:

* ``band`` / ``block``: natural order (a diagonal band of width l / the diagonal l x l blocks);
* ``stride``: the residue-major permutation i = a*l + r -> r*nb + a turns it into causal attention
  inside contiguous segments of nb positions (block diagonal); in natural order it would touch
  every tile;
* ``summary``: the c summary keys of each block are gathered per head into a short key sequence
  (nb*c keys), a causal-looking staircase of tiles.

Parts are unioned in one softmax by combining their outputs with their log-sum-exps (FlexAttention
differentiates through the returned lse). Forward works on CPU too (eager, no grad: used by the CPU
tests to check the masks); backward needs CUDA.
"""
from __future__ import annotations

import math

import torch

BLOCK_SIZE = 128
_COMPILED = None
_MASKS: dict = {}


def available() -> bool:
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:  # pragma: no cover
        return False
    return torch.cuda.is_available()


def _flex_fn(device: torch.device):
    from torch.nn.attention.flex_attention import flex_attention

    global _COMPILED
    if device.type != "cuda":
        return flex_attention
    if _COMPILED is None:
        import torch._dynamo.config as dcfg

        # one graph per (part, shape); the default limit of 8 would silently fall back to eager
        # FlexAttention, which materialises the scores
        for name in ("cache_size_limit", "recompile_limit"):
            if hasattr(dcfg, name):
                setattr(dcfg, name, max(64, getattr(dcfg, name)))
        _COMPILED = torch.compile(flex_attention, dynamic=False)
    return _COMPILED


def _block_mask(key, mask_mod, H, q_len, kv_len, device):
    from torch.nn.attention.flex_attention import create_block_mask

    key = (*key, H, q_len, kv_len, str(device))
    if key not in _MASKS:
        _MASKS[key] = create_block_mask(mask_mod, B=None, H=H, Q_LEN=q_len, KV_LEN=kv_len, device=device,
                                        BLOCK_SIZE=BLOCK_SIZE)
    return _MASKS[key]


def _call(q, k, v, block_mask, scale):
    from torch.nn.attention.flex_attention import AuxRequest

    o, aux = _flex_fn(q.device)(q, k, v, block_mask=block_mask, scale=scale, return_aux=AuxRequest(lse=True))
    return o, aux.lse


def _band(q, k, v, l, scale):
    n = q.shape[2]

    def mm(b, h, qi, ki):
        return (ki <= qi) & (qi - ki < l)

    return _call(q, k, v, _block_mask(("band", l), mm, None, n, n, q.device), scale)


def _block(q, k, v, l, scale):
    n = q.shape[2]

    def mm(b, h, qi, ki):
        return (ki <= qi) & (qi // l == ki // l)

    return _call(q, k, v, _block_mask(("block", l), mm, None, n, n, q.device), scale)


def _stride(q, k, v, l, scale, strict):
    B, H, n, _ = q.shape
    nb = n // l
    rm = lambda t: t.view(B, H, nb, l, t.shape[-1]).transpose(2, 3).reshape(B, H, n, t.shape[-1])  # noqa: E731

    def mm(b, h, qi, ki):
        same = qi // nb == ki // nb
        return same & ((ki < qi) if strict else (ki <= qi))

    o, lse = _call(rm(q), rm(k), rm(v), _block_mask(("stride", l, strict), mm, None, n, n, q.device), scale)
    o = o.view(B, H, l, nb, -1).transpose(2, 3).reshape(B, H, n, -1)
    lse = lse.view(B, H, l, nb).transpose(2, 3).reshape(B, H, n)
    return o, lse


def _summary(q, k, v, l, c, lo, scale, strict):
    B, H, n, _ = q.shape
    nb = n // l
    lo_t = torch.tensor(lo, device=q.device)
    base = (torch.arange(nb, device=q.device)[:, None] * l + torch.arange(c, device=q.device)[None, :]).reshape(-1)
    idx = lo_t[:, None] + base[None, :]  # (H, nb*c)
    ks, vs = (torch.gather(t, 2, idx[None, :, :, None].expand(B, H, nb * c, t.shape[-1])) for t in (k, v))
    if strict:
        def mm(b, h, qi, ki):
            return (ki // c) < (qi // l)

        bm = _block_mask(("summary", l, c, True), mm, None, n, nb * c, q.device)
    else:
        def mm(b, h, qi, ki):
            return (ki // c) * l + lo_t[h] + ki % c <= qi

        bm = _block_mask(("summary", l, c, False, tuple(lo)), mm, H, n, nb * c, q.device)
    return _call(q, ks, vs, bm, scale)


def flex_attention_pattern(q, k, v, pattern: str, stride: int, c: int | None = None, scale: float | None = None):
    """Sparse attention of one head group with FlexAttention (same contract as ``blocked_attention``)."""
    from repro.models.patterns import summary_offsets

    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    n, l = q.shape[2], stride
    pad = (-n) % l
    if pad:
        q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    lo = [summary_offsets(l, c, h)[0] for h in range(q.shape[1])] if pattern in ("fixed", "summary") else None
    parts = {
        "local": lambda: [_band(q, k, v, l, scale)],
        "stride": lambda: [_stride(q, k, v, l, scale, False)],
        "strided": lambda: [_band(q, k, v, l, scale), _stride(q, k, v, l, scale, True)],
        "block": lambda: [_block(q, k, v, l, scale)],
        "summary": lambda: [_summary(q, k, v, l, c, lo, scale, False)],
        "fixed": lambda: [_block(q, k, v, l, scale), _summary(q, k, v, l, c, lo, scale, True)],
    }[pattern]()
    if len(parts) == 1:
        o, lse = parts[0]
        # rows without keys: FlexAttention already returns 0 there
    else:
        lses = torch.stack([p[1].float() for p in parts])
        tot = torch.logsumexp(lses, dim=0)
        tot = torch.where(torch.isinf(tot), torch.zeros_like(tot), tot)
        o = sum(torch.exp(lp - tot).unsqueeze(-1).to(op.dtype) * op for (op, _), lp in zip(parts, lses))
    return o[:, :, :n] if pad else o
