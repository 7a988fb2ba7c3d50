"""A sliding window with global tokens (Longformer-style, Beltagy et al. 2020; neither paper's): each query
sees itself and the W - 1 positions before it (W = ``span.limit``) and the first g = ``globals`` positions
of the sequence. Computed on the band of :mod:`repro.models.relative_attention` with the g global keys
beside it in one softmax: a global key inside the query's window is counted once, in the window."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from repro.models import relative_attention as band


class Attention(nn.Module):
    loss = None

    def __init__(self, cfg, layer: int):
        super().__init__()
        self.S, self.g = cfg.span.limit, cfg.globals

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        B, H, T, dh = q.shape
        W, g = min(T, self.S), min(T, self.g)
        P, chunk = W - 1, band.chunk_size(T, W)
        n = math.ceil(T / chunk)
        Tp = n * chunk
        qc = F.pad(q / math.sqrt(dh), (0, 0, 0, Tp - T)).view(B, H, n, chunk, dh)
        kw = band.windows(F.pad(k, (0, 0, P, Tp - T)), chunk, P)  # (B, H, n, chunk + P, d_h)
        vw = band.windows(F.pad(v, (0, 0, P, Tp - T)), chunk, P)
        off_band = band.keys_from_band(q.new_zeros(chunk, P + 1), P, band.NEG_INF)  # (chunk, chunk + P)
        s_w = (qc @ kw.transpose(-1, -2) + off_band).masked_fill(
            band.padding_keys(n, chunk, P, P, q.device), band.NEG_INF
        )
        t = torch.arange(Tp, device=q.device).view(n, chunk, 1)
        global_only = torch.arange(g, device=q.device) < t - P  # causal, and not already in the window
        s_g = (qc @ k[:, :, None, :g].transpose(-1, -2)).masked_fill(~global_only, band.NEG_INF)
        a = torch.softmax(torch.cat([s_g, s_w], -1), -1)
        out = a[..., :g] @ v[:, :, None, :g] + a[..., g:] @ vw
        return out.reshape(B, H, Tp, dh)[:, :, :T]

    def keys_per_query(self, T: int) -> float:
        t = torch.arange(T, dtype=torch.float64)
        W = min(T, self.S)
        return float(((t + 1).clamp(max=W) + (t - (W - 1)).clamp(min=0, max=self.g)).mean())

    def spans(self):
        return None
