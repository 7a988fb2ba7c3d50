"""The adaptive-span attention written as eq. 5 reads, every (t, r) pair scored: the reference the fast
paths of :class:`repro.models.adaptive_span.SpanAttention` (the band, the trimmed window, the per-query
buckets of :mod:`repro.models.relative_attention`) are tested against, as
:mod:`repro.models.kernels.reference` is for the Sparse Transformer's patterns.

Eq. 5 (Sukhbaatar et al. 2019, section 3.1), for query t and a head of span z:

    a_tr = m_z(t - r) exp(s_tr) / sum_{q = t-S}^{t-1} m_z(t - q) exp(s_tq),   r = t-S .. t-1,

with m_z the soft mask of eq. 4 (:func:`repro.models.span.soft_mask`) and s_tr = q_t . (k_r + p_{t-r})
/ sqrt(d_h), the relative position embedding added to the key as in the official code. Quadratic in
the stream's length, for tests and reading only.

The two windows (``model.window``, repro.models.adaptive_span):

- ``past``: eq. 5's range, r = t-S .. t-1; the mask and the position embedding take the distance
  minus one, m_z(t - r - 1) and p_{t-r-1}, and the stream is preceded by S zero hidden states that do
  take weight (the official code's: its cache starts as zeros);
- ``self_and_past``: r = t-S+1 .. t, the query itself included, m_z(t - r) and p_{t-r} as eq. 4 and 5
  write the distance, so m_z(0) = 1 and no row is empty; positions before the stream get no weight.

``mask_norm: official`` (``attn.renormalise`` = eps) writes the official code's order instead: p the
softmax over the S keys, then a_tr = m p_tr / (sum_q m p_tq + eps); it equals the model's untrimmed band
(``attn.trim = False``), whose softmax runs over the same S keys.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from repro.models.span import soft_mask


def dense_attention(attn, h: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """The output of ``attn`` (a :class:`SpanAttention`) for the whole stream ``h`` (B, T, d_model) at
    once, eq. 5 over every pair; ``pe``: the position embeddings p_x (d_h, S)."""
    B, T, d = h.shape
    H, dh = attn.H, attn.dh
    S, R, kind = attn.span.cfg.limit, attn.span.cfg.ramp, attn.span.cfg.kind
    pad = S if attn.shift else 0  # `past`: S zero hidden states before the stream
    hk = F.pad(h, (0, 0, pad, 0))
    q = attn.q(h).view(B, T, H, dh).transpose(1, 2)
    k, v = (lin(hk).view(B, T + pad, H, dh).transpose(1, 2) for lin in (attn.k, attn.v))
    x = (torch.arange(T)[:, None] + pad) - torch.arange(T + pad)[None, :] - attn.shift  # the mask's argument
    reached = (x >= 0) & (x < S)
    pos = torch.einsum("bhtd,dtr->bhtr", q, pe[:, x.clamp(0, S - 1)])
    s = ((q @ k.transpose(-1, -2)) + pos) / math.sqrt(dh)
    s = s.masked_fill(~reached, float("-inf"))
    w = e = torch.exp(s - s.amax(-1, keepdim=True))
    if kind == "adaptive":  # z per head
        z = S * attn.z_prime.clamp(0, 1)
        w = w * soft_mask(x.to(w.dtype), z[:, None, None], R)
    elif kind == "dynamic":  # z_t per query and head (section 3.2)
        z_t = S * torch.sigmoid(attn.span_proj(h))  # (B, T, H)
        w = w * soft_mask(x.to(w.dtype), z_t.transpose(1, 2)[..., None], R)
    if attn.renormalise is not None and kind != "fixed":  # m p with p = softmax(s), renormalised + eps
        mp = w / e.sum(-1, keepdim=True)
        a = mp / (mp.sum(-1, keepdim=True) + attn.renormalise)
    else:
        a = w / w.sum(-1, keepdim=True)  # a_tr = m exp(s) / sum m exp(s)
    return attn.o((a @ v).transpose(1, 2).reshape(B, T, d))


def dense_logits(model, x: torch.Tensor) -> torch.Tensor:
    """The logits of an adaptive-span ``model`` (:class:`repro.models.adaptive_span.Model`, dropout off)
    for the token stream ``x`` (B, T) in one pass, every layer's attention :func:`dense_attention`."""
    h = model.emb(x)
    for layer in model.layers:
        h = layer.norm1(h + dense_attention(layer.attn, h, model.pe))
        h = layer.norm2(h + layer.ff2(F.relu(layer.ff1(h))))
    return model.out(h)
