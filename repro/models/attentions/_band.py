"""What the span attentions share (window, adaptive, dynamic): Sukhbaatar et al.'s span mechanism
(:mod:`repro.models.span`, eq. 4-6) applied by the band attention of :mod:`repro.models.relative_attention`
to a causal sequence, without an (T x T) score tensor. On this backbone positions are absolute (added to
the input), so the band's relative position term is zero; a query sees itself and the W - 1 positions
before it (distances 0 .. W - 1; the paper's eq. 5 sums over r = t - S .. t - 1, the frontier counts the
query itself as every other attention here does)."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from repro.models import relative_attention as band
from repro.models.span import make_span


class SpanBand(nn.Module):
    kind = "fixed"  # the span kind of repro.models.span

    def __init__(self, cfg, layer: int):
        super().__init__()
        self.cfg = cfg
        self.span = make_span(cfg.span.model_copy(update={"kind": self.kind}), cfg.heads)
        self.span.add_parameters(self, cfg.d_model)
        self.loss, self.z_seen = None, None

    def reset_parameters(self) -> None:
        """The span's parameters back at their initial values (the backbone's N(0, init_std) drew over them)."""
        self.span.init_parameters(self)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        B, H, T, dh = q.shape
        z = self.span.z(self, x)
        W = min(T, self.span.window(z))
        P = W - 1
        pad = (0, 0, P, 0)  # P positions before the sequence: padding, no weight (n_invalid)
        distances = torch.arange(W - 1, -1, -1, device=q.device, dtype=q.dtype)  # band order
        out = band.band_attention(
            q / math.sqrt(dh),
            F.pad(k, pad),
            F.pad(v, pad),
            q.new_zeros(dh, W),
            chunk=band.chunk_size(T, W),
            mask=None if z is None else self.span.mask(distances, z),
            n_invalid=P,
        )
        self.loss = self.span.loss(self, z)
        self.z_seen = None if z is None or z.dim() == 1 else z.detach()
        return out

    def keys_per_query(self, T: int) -> float:
        t = torch.arange(1, T + 1, dtype=torch.float64)
        return float(torch.stack([t.clamp(max=w).mean() for w in self.spans()[1].double()]).mean())

    def spans(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.span.head_spans(self, self.z_seen)
