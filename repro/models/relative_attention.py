"""Relative-position attention over a band of the last W positions, without an (n x S) score tensor.

Layout. Keys/values hold P = W - 1 past positions followed by the T current ones. Query i (0..T-1)
sits at key index P + i and sees keys j = i .. i + P, i.e. the distances x = t - r = P + i - j in
0 .. W-1 (itself included). Queries go in chunks of ``chunk``; chunk a's keys are the chunk + P that end
with it (overlapping views of k and v, never copies). Everything is computed in this *key layout*
(.., chunk, chunk + P): row i's band is columns i .. i + P, and every other column is -inf before the
softmax, so its weight is exactly 0.

* the content part q_t . k_r is one (chunk x (chunk + P)) matmul per chunk;
* the position part q_t . p_{t-r} is a plain (chunk x W) matmul against the embeddings of the W
  distances, in the *band layout* (.., chunk, W) whose column c holds distance x = W - 1 - c; the soft
  span mask m joins it there as log m (a = m exp(s) / sum m exp(s) = softmax(s + log m), eq. 5), and
  :class:`_BandToKeys` moves the sum into the key layout in one copy (its backward is the inverse copy);
* the weights multiply the values' window directly, ``a @ v``.

The cost is chunk + P columns per query instead of W, so with chunk ~ W at most twice the band, never
T x S; every elementwise pass (the bias, the softmax, dropout and their backwards) runs once.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NEG_INF = float("-inf")


def band_from_keys(s: torch.Tensor, P: int) -> torch.Tensor:
    """(.., c, c + P) key layout -> (.., c, P + 1) band: ``out[a, b] = s[a, a + b]`` (a strided view)."""
    s = s.contiguous()
    n = s.shape[-1]
    return s.as_strided((*s.shape[:-1], P + 1), (*s.stride()[:-2], n + 1, 1))  # at s's own offset


def keys_from_band(a: torch.Tensor, P: int, fill: float = 0.0) -> torch.Tensor:
    """Inverse of :func:`band_from_keys`: (.., c, P + 1) -> (.., c, c + P), ``fill`` off the band (a copy).

    Row r of the padded (c, c + P + 1) rows, read c + P at a time, starts r places later in its band (row
    r's first r columns are the padding at the end of row r - 1). A strided view of the padded copy, so
    that a compiler reads it with plain affine indices."""
    c = a.shape[-2]
    a = F.pad(a, (0, c), value=fill)  # (.., c, c + P + 1), a fresh tensor (storage offset 0)
    return a.as_strided((*a.shape[:-1], c + P), (*a.stride()[:-2], c + P, 1))


class _BandToKeys(torch.autograd.Function):
    """:func:`keys_from_band` with -inf off the band, differentiable: the gradient of a copy is the
    inverse copy (:func:`band_from_keys`), which autograd's pad/reshape/slice chain would instead build
    from zero-filled buffers."""

    @staticmethod
    def forward(ctx, band, P):
        ctx.P = P
        return keys_from_band(band, P, NEG_INF)

    @staticmethod
    def backward(ctx, grad):
        return band_from_keys(grad, ctx.P), None


def as_band(a: torch.Tensor) -> torch.Tensor:
    """Weights (or scores) in the key layout (B, H, n, chunk, chunk + P) -> the band (B, H, n * chunk, W):
    row i, column c is the key at distance W - 1 - c (a view where ``a`` is contiguous)."""
    B, H, n, c, K = a.shape
    P = K - c
    return band_from_keys(a, P).reshape(B, H, n * c, P + 1)


def windows(t: torch.Tensor, chunk: int, P: int) -> torch.Tensor:
    """The keys (or values) of every chunk of queries, (B, H, P + Tp, d_h) -> (B, H, n, chunk + P, d_h):
    overlapping windows, or for a single chunk the tensor itself as a view (no unfold, whose backward
    materialises a zero-filled gradient and scatters into it)."""
    if t.shape[2] == chunk + P:
        return t.unsqueeze(2)
    return t.unfold(2, chunk + P, chunk).transpose(-1, -2)


def chunk_size(T: int, W: int, minimum: int = 64) -> int:
    """Queries per chunk: about the band width (cost T (chunk + W)), at most the block."""
    return max(1, min(T, max(minimum, W)))


def log_mask(m: torch.Tensor) -> torch.Tensor:
    """log m, exactly -inf where m = 0, with a finite gradient everywhere (0 where m = 0)."""
    return m.clamp(min=torch.finfo(m.dtype).tiny).log().masked_fill(m <= 0, NEG_INF)


def band_scores(q, k, pe, *, chunk: int, mask=None) -> torch.Tensor:
    """Scores s_tr = q_t . (k_r + p_{t-r}) + log m(t - r) in the key layout: (B, H, n, chunk, chunk + P).

    q: (B, H, T, d_h); k: (B, H, P + T, d_h); pe: (d_h, W) in band order (column c <-> distance
    W - 1 - c); ``mask``: the soft span mask m broadcastable to (B, H, T, W) in band order, or None. Row i
    of chunk a is query a * chunk + i; rows past T pad the block to whole chunks (zero queries). Keys
    off the band are -inf."""
    B, H, T, dh = q.shape
    W = pe.shape[-1]
    P = W - 1
    assert k.shape[2] == P + T, (k.shape, P, T)
    n = math.ceil(T / chunk)
    Tp = n * chunk
    if Tp != T:
        q = F.pad(q, (0, 0, 0, Tp - T))
        k = F.pad(k, (0, 0, 0, Tp - T))
    q = q.reshape(B, H, n, chunk, dh)
    bias = q @ pe  # (B, H, n, chunk, W): the position part, in band order
    if mask is not None:
        lm = log_mask(mask)
        if lm.shape[-2] == T and T > 1:  # per-query mask: its rows in chunks, padding rows unmasked
            lm = F.pad(lm.expand(B, H, T, W), (0, 0, 0, Tp - T)).view(B, H, n, chunk, W)
        else:
            lm = lm.unsqueeze(-3)
        bias = bias + lm
    return q @ windows(k, chunk, P).transpose(-1, -2) + _BandToKeys.apply(bias, P)


def padding_keys(n: int, chunk: int, P: int, n_invalid: int, device) -> torch.Tensor | None:
    """(n, 1, chunk + P): the keys of each chunk that are padding before the stream's start (key index
    < ``n_invalid``), in the key layout; None when there are none."""
    if n_invalid <= 0:
        return None
    j = torch.arange(chunk + P, device=device) + chunk * torch.arange(n, device=device)[:, None]
    return (j < n_invalid)[:, None, :]


def band_softmax(s: torch.Tensor, invalid: torch.Tensor | None = None) -> torch.Tensor:
    """Attention weights from the scores of :func:`band_scores`: softmax over the keys, none on the
    padding keys ``invalid`` (:func:`padding_keys`)."""
    if invalid is not None:
        s = s.masked_fill(invalid, NEG_INF)
    return torch.softmax(s, dim=-1)


class BandSoftmax(nn.Module):
    """:func:`band_softmax` as a module without parameters, so that analyses can read a layer's weights
    with a forward hook (arguments: the scores and padding keys, in the key layout; output: the weights
    there, before dropout; :func:`as_band` views them as the band)."""

    def forward(self, s, invalid=None):
        return band_softmax(s, invalid)


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
    renormalise: float | None = None,
):
    """Attention of T queries over the band of the W = P + 1 latest positions, optionally soft-masked.

    q: (B, H, T, d_h), already scaled by 1/sqrt(d_h); k, v: (B, H, P + T, d_h); pe: (d_h, W) position
    embeddings in band order (column c <-> distance W - 1 - c). ``mask``: soft span mask broadcastable
    to (B, H, T, W), or None (every position in the band counts); it multiplies exp(s) before the
    normalisation: a = m exp(s) / sum m exp(s). ``renormalise`` (eps): the official code's order instead,
    the softmax over the band first, then the mask, then a = m p / (sum m p + eps) (the same weights but for
    eps; a mask per head only, (H, 1, W)). The first ``n_invalid`` keys are padding (before the start of
    the stream) and get no weight. ``softmax``: :func:`band_softmax` or a :class:`BandSoftmax`.
    Returns (B, H, T, d_h).
    """
    B, H, T, dh = q.shape
    P = pe.shape[-1] - 1
    after = renormalise is not None and mask is not None
    s = band_scores(q, k, pe, chunk=chunk, mask=None if after else mask)  # (B, H, n, chunk, chunk + P)
    n = s.shape[2]
    a = softmax(s, padding_keys(n, chunk, P, n_invalid, q.device))
    if after:
        m = keys_from_band(mask.expand(H, chunk, P + 1), P).unsqueeze(-3)  # (H, 1, chunk, chunk + P)
        a = a * m
        a = a / (a.sum(-1, keepdim=True) + renormalise)
    a = F.dropout(a, dropout, training)
    Tp = n * chunk
    if Tp != T:
        v = F.pad(v, (0, 0, 0, Tp - T))
    out = a @ windows(v, chunk, P)  # (B, H, n, chunk, d_h)
    return out.reshape(B, H, Tp, dh)[:, :, :T]


def bucket_widths(W: int, base: int = 64) -> list[int]:
    """The band widths of :func:`bucketed_attention`'s buckets: base, 2 base, 4 base, .. up to W."""
    widths = [min(W, base)]
    while widths[-1] < W:
        widths.append(min(W, 2 * widths[-1]))
    return widths


def bucketed_attention(
    q,
    k,
    v,
    pe,
    *,
    need: torch.Tensor,
    mask_of,
    n_invalid: int = 0,
    dropout: float = 0.0,
    training: bool = False,
    softmax=band_softmax,
    base: int = 64,
    tile: int = 16,
):
    """:func:`band_attention` for queries that each need only the nearest distances of the band
    (per-query spans), at a cost that follows each query's need rather than the band's width W.

    ``need``: (B, H, T), the distances 0 .. need - 1 each query gives weight (1 <= need <= W; beyond, the
    soft mask is 0). The queries go into buckets of widths w = base, 2 base, 4 base, .. W (the smallest
    w >= need: at most twice the need beyond ``base``). Query t of the block sees keys t .. t + w - 1 of
    its sequence's and head's last w + T - 1 keys, so a bucket's queries of one sequence and head share
    those keys: they are cut into tiles of ``tile`` queries (the last tile padded; padding rows are
    computed and dropped), each tile one (tile x (w + T - 1)) product with a copy of its keys and values.
    ``mask_of(x, rows)``: the soft mask (N, tile, w) of the queries ``rows`` (N, tile), indices into the
    flattened (B, H, T), at the distances ``x`` (w,) in band order. Other arguments as
    :func:`band_attention`. Returns (B, H, T, d_h).
    """
    B, H, T, dh = q.shape
    W = pe.shape[-1]
    P = W - 1
    S = B * H  # sequences x heads, flattened: row r is query r % T of pair r // T
    widths = bucket_widths(W, base)
    bucket = torch.bucketize(need.reshape(S * T), torch.tensor(widths, device=q.device, dtype=need.dtype))
    group = bucket * S + torch.arange(S * T, device=q.device) // T  # (bucket, pair) of every row
    order = torch.argsort(group, stable=True)  # the rows by bucket, then pair, then position
    counts = torch.bincount(group, minlength=len(widths) * S)
    starts = (counts.cumsum(0) - counts).view(len(widths), S)
    counts = counts.view(len(widths), S)
    q_rows = q.reshape(S * T, dh)
    k_pairs, v_pairs = k.reshape(S, P + T, dh), v.reshape(S, P + T, dh)
    rows_of, outs = [], []
    for b, w in enumerate(widths):
        n_tiles = (counts[b] + tile - 1) // tile  # (S,)
        N = int(n_tiles.sum())
        if N == 0:
            continue
        pair = torch.repeat_interleave(torch.arange(S, device=q.device), n_tiles)  # (N,)
        first = torch.cumsum(n_tiles, 0) - n_tiles
        slot = (torch.arange(N, device=q.device) - first[pair])[:, None] * tile + torch.arange(tile, device=q.device)
        rows = order[(starts[b, pair][:, None] + slot).clamp(max=S * T - 1)]  # (N, tile) flat row indices
        rows = rows.masked_fill(slot >= counts[b, pair][:, None], S * T)  # padding rows: dropped below
        rows_c = rows.clamp(max=S * T - 1)
        # gathers by index_select: its backward adds whole rows (index_add_), where indexing's
        # (index_put_ with accumulate) went element by element, a fifth of the dynamic span's step
        qs = q_rows.index_select(0, rows_c.reshape(-1)).view(N, tile, dh)  # (N, tile, d_h)
        kw = k_pairs[:, P - w + 1 :].index_select(0, pair)  # (N, w + T - 1, d_h): the pair's last w + T - 1 keys
        vw = v_pairs[:, P - w + 1 :].index_select(0, pair)
        x = torch.arange(w - 1, -1, -1, device=q.device, dtype=q.dtype)  # distance of each band column
        bias = qs @ pe[:, W - w :] + log_mask(mask_of(x, rows_c))  # (N, tile, w), band order
        cols = (rows_c % T)[..., None] + torch.arange(w, device=q.device)  # query t's band starts at key t
        bias = torch.full((N, tile, w + T - 1), NEG_INF, device=q.device, dtype=q.dtype).scatter(-1, cols, bias)
        invalid = None
        if n_invalid > P - w + 1:  # padding keys (index < n_invalid) inside this bucket's keys
            invalid = torch.arange(w + T - 1, device=q.device) < n_invalid - (P - w + 1)
        a = softmax(qs @ kw.transpose(-1, -2) + bias, invalid)
        outs.append((F.dropout(a, dropout, training) @ vw).reshape(N * tile, dh))
        rows_of.append(rows.reshape(N * tile))
    rows = torch.cat(rows_of)
    out = q.new_zeros(S * T + 1, dh).index_copy(0, rows, torch.cat(outs))
    return out[: S * T].view(B, H, T, dh)
