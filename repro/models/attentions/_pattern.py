"""What the factorised attentions share (Child et al. 2019, section 4): the Sparse Transformer's patterns
(:mod:`repro.models.patterns`) through its kernels (:func:`repro.models.kernels.attend`), with the
combination ``combine`` (``interleaved``: the layer's part by layer index)."""

from __future__ import annotations

import torch
import torch.nn as nn

from repro.models import patterns as P
from repro.models.kernels import attend


class Pattern(nn.Module):
    pattern = "strided"
    loss = None

    def __init__(self, cfg, layer: int):
        super().__init__()
        self.cfg = cfg
        self.layer_pattern = P.layer_patterns(self.pattern, cfg.combine, layer + 1)[layer]

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        return attend(q, k, v, self.layer_pattern, c.stride, c.c, combine=c.combine)

    def keys_per_query(self, T: int) -> float:
        c = self.cfg
        return float(P.layer_keys(self.layer_pattern, c.combine, c.heads, T, c.stride, c.c))

    def spans(self):
        return None
