"""The adaptive attention span (Sukhbaatar, Grave, Bojanowski, Joulin 2019; arXiv 1905.07799, section 3).

Each head weighs the key at distance x = t - r from query t by a soft mask of its span z, before the
normalisation (eq. 5): a_tr = m_z(t - r) exp(s_tr) / sum_q m_z(t - q) exp(s_tq), r and q in t-S .. t-1
(which keys a query sees, and from where distances count, is ``model.window``: repro.models.adaptive_span;
:mod:`repro.models.span_reference` computes eq. 5 over every pair). This module is that
mechanism and nothing else: the mask (eq. 4), the span of each kind, the span loss (eq. 6) and the
trimming rule (which distances and past states a layer needs, given its spans). The attention that applies
it is ``repro.models.adaptive_span.SpanAttention``; the Figure 2 renderer draws ``soft_mask``.

The kinds share one interface (:class:`FixedSpan`); :func:`make_span` is the only place that picks one.
A kind's learned parameters live on the attention module that uses it (``attn.z_prime``,
``attn.span_proj``, the names stored checkpoints hold): ``add_parameters`` creates them there and the
other methods read them from the ``attn`` they are given. Spans are in tokens; S = ``limit``, R = ``ramp``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from repro.config.families import SpanConfig

TRIM_MULTIPLE = 64  # band widths and cache slack are multiples of this (coarse sizes reuse memory)


def soft_mask(x: torch.Tensor, z: torch.Tensor | float, ramp: float) -> torch.Tensor:
    """Eq. 4: m_z(x) = min(max((R + z - x) / R, 0), 1) at distance x for span z and ramp R (shapes broadcast).

    1 up to x = z, a linear ramp down to 0 at x = z + R; on the ramp its derivative in z is 1/R, which is
    how z learns."""
    return ((ramp + z - x) / ramp).clamp(0.0, 1.0)


def trimmed_window(z_max: float, limit: int, ramp: int) -> int:
    """Trimming rule: a layer whose largest span is z_max attends distances 0 .. W-1 with
    W = min(S, z_max + R rounded up to a multiple of 64); beyond z + R every mask is 0."""
    return min(limit, TRIM_MULTIPLE * math.ceil(math.ceil(z_max + ramp) / TRIM_MULTIPLE))


class FixedSpan:
    """``fixed``: every head sees the last S tokens; no mask, no parameter, no loss, nothing to trim.

    The interface of the kinds: ``z`` gives a block's spans, ``mask`` their mask over the attended
    distances, ``loss`` the layer's span penalty, ``window`` and ``cache_len`` the trimming."""

    per_query = False  # whether z depends on the block's input (then statistics describe the last block)

    def __init__(self, cfg: SpanConfig, heads: int):
        self.cfg, self.S, self.R, self.heads = cfg, cfg.limit, cfg.ramp, heads

    def add_parameters(self, attn: nn.Module, d_model: int) -> None:
        """Create this kind's learned parameters as attributes of ``attn``, at their initial values."""

    @torch.no_grad()
    def init_parameters(self, attn: nn.Module) -> None:
        """Set this kind's parameters on ``attn`` to their initial values (what ``add_parameters`` gives
        them): after a model's own initialisation, which reaches every Linear, has drawn over them."""

    def z(self, attn: nn.Module, h: torch.Tensor | None = None) -> torch.Tensor | None:
        """Spans of the queries of block ``h`` (B, T, d_model): (H,) per head or (B, T, H) per query; None
        without a mask, or, without ``h``, when they depend on the block."""
        return None

    def mask(self, x: torch.Tensor, z: torch.Tensor | None) -> torch.Tensor | None:
        """m_z at the band's distances ``x`` (W,), broadcastable to (B, H, T, W); None: every key counts."""
        return None

    def loss(self, attn: nn.Module, z: torch.Tensor | None) -> torch.Tensor | None:
        """This layer's term of the span penalty, before lambda (see :class:`AdaptiveSpan`)."""
        return None

    def window(self, z: torch.Tensor | None, z_max: float | None = None) -> int:
        """W, the distances 0 .. W-1 the layer attends for spans ``z`` (``z_max``: their largest, if known)."""
        return self.S

    def cache_len(self, window: int) -> int:
        """Past states the layer keeps for the next block, given this block's window."""
        return self.S - 1

    def head_spans(self, attn: nn.Module, z_seen: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(z, effective span min(S, z + R)) per head, (H,) each, for the statistics; ``z_seen``: the spans
        of the latest block (what a ``per_query`` kind reports), None before any."""
        full = torch.full((self.heads,), float(self.S))
        return full, full

    @torch.no_grad()
    def constrain(self, attn: nn.Module) -> None:
        """Project the parameters back into their domain (after every optimizer step)."""


class _LearnedSpan(FixedSpan):
    """What the adaptive and the dynamic span share: the soft mask and the trimmed window."""

    def mask(self, x, z):
        return soft_mask(x, z, self.R)

    def row_mask(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """m_z at the distances ``x`` (W,) for spans ``z`` of any shape: (*z.shape, W)."""
        return soft_mask(x, z[..., None], self.R)

    def window(self, z, z_max=None):
        if z is None:  # spans not known before the block (dynamic): the bound
            return self.S
        return trimmed_window(float(z.detach().max()) if z_max is None else z_max, self.S, self.R)

    def _per_head(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = z.detach()
        eff = (z + self.R).clamp(max=self.S)
        return (z.mean((0, 1)), eff.mean((0, 1))) if z.dim() == 3 else (z, eff)


class AdaptiveSpan(_LearnedSpan):
    """``adaptive`` (section 3.1): z = S z' per head, z' in [0, 1] learned, initialised to ``init``.

    Span loss. The paper (eq. 6): L = -log P(w_1 .. w_T) + (lambda / M) sum_i z_i over all heads i, M the
    number of heads (per layer). ``loss_mode``: ``mean_times_S`` is lambda S mean_heads(z') = (lambda / M)
    sum_i z_i per layer, summed over layers: eq. 6's penalty, as the official code computes it (the
    published numbers); ``sum`` is lambda sum_i z_i without the 1/M (M times that penalty). Either is
    added, as in the official trainer, to the mean per-token loss -log P(w_1 .. w_T) / T, not to eq. 6's
    sum over the T tokens: the objective is eq. 6's with lambda T in place of lambda, divided by T (T the
    tokens of a batch). Both use the raw z' (unclamped) so the penalty always has a gradient.
    Trimming: the cache keeps W - 1 + 64 states (64 of slack for spans that grow), at most S - 1."""

    def add_parameters(self, attn, d_model):
        attn.z_prime = nn.Parameter(torch.empty(self.heads))
        self.init_parameters(attn)

    @torch.no_grad()
    def init_parameters(self, attn):
        attn.z_prime.fill_(float(self.cfg.init))

    def z(self, attn, h=None):
        return self.S * attn.z_prime.clamp(0.0, 1.0)

    def mask(self, x, z):
        return super().mask(x, z[:, None, None])  # (H, 1, W)

    def loss(self, attn, z):
        zp = self.S * attn.z_prime
        return zp.mean() if self.cfg.loss_mode == "mean_times_S" else zp.sum()

    def cache_len(self, window):
        return min(self.S - 1, window - 1 + TRIM_MULTIPLE)

    def head_spans(self, attn, z_seen):  # of the current z'
        return self._per_head(self.z(attn))

    @torch.no_grad()
    def constrain(self, attn):
        attn.z_prime.clamp_(0.0, 1.0)


class DynamicSpan(_LearnedSpan):
    """``dynamic`` (section 3.2): z_t = S sigmoid(v . x_t + b) from the query's input x_t, per head
    (v: H x d_model, b: H, initialised to ``dynamic_bias_init``). The penalty is :class:`AdaptiveSpan`'s on
    the mean z_t: lambda mean(z_t) per layer (``mean_times_S``) or lambda sum_heads mean(z_t) (``sum``). The window
    follows the block's largest z_t; the cache is not trimmed (the next block's z_t is not known)."""

    per_query = True

    def add_parameters(self, attn, d_model):
        attn.span_proj = nn.utils.skip_init(nn.Linear, d_model, self.heads)  # drawn once, below
        self.init_parameters(attn)

    @torch.no_grad()
    def init_parameters(self, attn):
        """v at PyTorch's default for a Linear (the random draws of its constructor, in their order), b
        the constant ``dynamic_bias_init``."""
        attn.span_proj.reset_parameters()
        nn.init.constant_(attn.span_proj.bias, self.cfg.dynamic_bias_init)

    def z(self, attn, h=None):
        return None if h is None else self.S * torch.sigmoid(attn.span_proj(h))  # (B, T, H)

    def mask(self, x, z):
        return self.row_mask(x, z.transpose(1, 2))  # (B, H, T, W)

    def loss(self, attn, z):
        return z.mean() if self.cfg.loss_mode == "mean_times_S" else z.mean((0, 1)).sum()

    def head_spans(self, attn, z_seen):
        """Means over the latest block's batch and positions; before any block S sigmoid(b), a zero input's."""
        return self._per_head(self.S * torch.sigmoid(attn.span_proj.bias) if z_seen is None else z_seen)


SPAN_KINDS: dict[str, type[FixedSpan]] = {"fixed": FixedSpan, "adaptive": AdaptiveSpan, "dynamic": DynamicSpan}


def make_span(cfg: SpanConfig, heads: int) -> FixedSpan:
    """The span kind ``cfg.kind`` of a layer with ``heads`` heads."""
    return SPAN_KINDS[cfg.kind](cfg, heads)


def span_statistics(zs: list[list[float]], effective: list[list[float]], limit: int) -> dict[str, Any]:
    """What a model's ``stats()`` says of its spans, from z and the effective span min(S, z + R) per layer
    per head (tokens): their mean effective span, the longest z, both lists, S, and the mean z of the lower
    and of the upper half of the layers (Figure 4's depth trend; None for one layer). Both families' spans
    are float32 values of at least R, so their float64 sum is exact and its mean is one rounding whatever
    the order of the terms."""
    L = len(zs)
    return {
        "avg_span": float(np.mean(effective)),
        "span_max": max(max(z) for z in zs),
        "spans": zs,
        "effective_spans": effective,
        "span_limit": limit,
        "span_lower_half": float(np.mean(zs[: L // 2])) if L > 1 else None,
        "span_upper_half": float(np.mean(zs[(L + 1) // 2 :])) if L > 1 else None,
    }
