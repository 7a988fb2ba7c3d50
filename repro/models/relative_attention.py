"""Relative-position attention over a band of the last W positions, without an (n x S) score tensor.

Layout. Keys/values hold P = W - 1 past positions followed by the M current ones. Query i (0..M-1)
sits at key index P + i and sees keys j = i .. i + P, i.e. the distances x = t - r = P + i - j in
0 .. W-1 (itself included). Scores live in a *band* (.., M, W) whose column c holds the distance
x = W - 1 - c (oldest first). The content part q_t . k_r is one (chunk x (chunk + P)) matmul per chunk
of queries, shifted ("skewed") into the band; the position part q_t . p_{t-r} is a plain (M x W)
matmul against the embeddings of the W distances. The cost is M (chunk + P) per head instead of M W,
so with chunk ~ W it is at most twice the band, never M x S.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def band_from_keys(s: torch.Tensor, P: int) -> torch.Tensor:
    """(.., c, c + P) key layout -> (.., c, P + 1) band: ``out[a, b] = s[a, a + b]`` (a strided view)."""
    s = s.contiguous()
    n = s.shape[-1]
    return s.as_strided((*s.shape[:-1], P + 1), (*s.stride()[:-2], n + 1, 1), s.storage_offset())


def keys_from_band(a: torch.Tensor, P: int) -> torch.Tensor:
    """Inverse of :func:`band_from_keys`: (.., c, P + 1) -> (.., c, c + P), zero off the band."""
    c = a.shape[-2]
    a = F.pad(a, (0, c))  # (.., c, c + P + 1)
    a = a.reshape(*a.shape[:-2], c * (c + P + 1))[..., : c * (c + P)]
    return a.view(*a.shape[:-1], c, c + P)


def windows(t: torch.Tensor, chunk: int, P: int) -> torch.Tensor:
    """The keys (or values) of every chunk of queries, (B, H, P + Mp, d_h) -> (B, H, n, chunk + P, d_h):
    overlapping windows, or for a single chunk the tensor itself as a view (no unfold, whose backward
    materialises a zero-filled gradient and scatters into it)."""
    if t.shape[2] == chunk + P:
        return t.unsqueeze(2)
    return t.unfold(2, chunk + P, chunk).transpose(-1, -2)


def chunk_size(M: int, W: int, minimum: int = 64) -> int:
    """Queries per chunk: about the band width (cost M (chunk + W)), at most the block."""
    return max(1, min(M, max(minimum, W)))


def band_scores(q, k, pe, *, chunk: int) -> torch.Tensor:
    """Band of scores s_tr = q_t . (k_r + p_{t-r}) (relative positions added to keys): (B, H, Mp, W).

    q: (B, H, M, d_h); k: (B, H, P + M, d_h); pe: (d_h, W) in band order. Column c of row i holds the
    key i + c, at distance W - 1 - c. Rows M..Mp-1 pad M up to a multiple of ``chunk``."""
    B, H, M, dh = q.shape
    W = pe.shape[-1]
    P = W - 1
    assert k.shape[2] == P + M, (k.shape, P, M)
    n = math.ceil(M / chunk)
    Mp = n * chunk
    if Mp != M:
        q = F.pad(q, (0, 0, 0, Mp - M))
        k = F.pad(k, (0, 0, 0, Mp - M))
    q = q.reshape(B, H, n, chunk, dh)
    s = q @ windows(k, chunk, P).transpose(-1, -2)  # (B, H, n, chunk, chunk + P)
    return (band_from_keys(s, P) + q @ pe).view(B, H, Mp, W)


def band_softmax(
    s: torch.Tensor, mask: torch.Tensor | None = None, invalid: torch.Tensor | None = None
) -> torch.Tensor:
    """Attention weights over a band of scores s (B, H, Mp, W): a = m exp(s) / sum m exp(s) with the soft
    span mask ``m`` broadcastable to s (None: every position counts); band cells where ``invalid``
    (Mp, W) holds are padding keys (before the start of the stream) and get no weight."""
    if invalid is not None:
        s = s.masked_fill(invalid, float("-inf"))
    if mask is None:
        return torch.softmax(s, dim=-1)
    # exp(s) where m = 0 never counts; excluding those keeps the max inside softmax finite
    a = torch.softmax(s.masked_fill(mask <= 0, float("-inf")), dim=-1) * mask
    return a / a.sum(-1, keepdim=True)


class BandSoftmax(nn.Module):
    """:func:`band_softmax` as a module without parameters, so that analyses can read the weights of a
    layer with a forward hook (arguments: s, mask, invalid; output: the weights, before dropout)."""

    def forward(self, s, mask=None, invalid=None):
        return band_softmax(s, mask, invalid)


def band_attention(
    q,
    k,
    v,
    pe,
    *,
    chunk: int,
    mask=None,
    n_invalid: int = 0,
    dropout: float = 0.0,
    training: bool = False,
    softmax=band_softmax,
):
    """Attention of M queries over the band of the W = P + 1 latest positions, optionally soft-masked.

    q: (B, H, M, d_h), already scaled by 1/sqrt(d_h); k, v: (B, H, P + M, d_h); pe: (d_h, W) position
    embeddings in band order (column c <-> distance W - 1 - c). ``mask``: soft span mask broadcastable
    to (B, H, M, W), or None (every position in the band counts); it multiplies exp(s) before the
    normalisation: a = m exp(s) / sum m exp(s). The first ``n_invalid`` keys are padding (before the
    start of the stream) and get no weight. ``softmax``: :func:`band_softmax` or a :class:`BandSoftmax`.
    Returns (B, H, M, d_h).
    """
    B, H, M, dh = q.shape
    W = pe.shape[-1]
    P = W - 1
    n = math.ceil(M / chunk)
    Mp = n * chunk
    if Mp != M:
        v = F.pad(v, (0, 0, 0, Mp - M))
        if mask is not None and mask.shape[-2] == M and M > 1:
            mask = F.pad(mask, (0, 0, 0, Mp - M), value=1.0)
    invalid = None
    if n_invalid > 0:
        i = torch.arange(Mp, device=q.device)[:, None]
        invalid = (i + torch.arange(W, device=q.device)) < n_invalid  # key index i + c is padding
    a = softmax(band_scores(q, k, pe, chunk=chunk), mask, invalid)  # (B, H, Mp, W)
    a = F.dropout(a, dropout, training)
    a = keys_from_band(a.view(B, H, n, chunk, W), P)  # (B, H, n, chunk, chunk + P)
    out = a @ windows(v, chunk, P)  # (B, H, n, chunk, d_h)
    return out.reshape(B, H, Mp, dh)[:, :, :M]
