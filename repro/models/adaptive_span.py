"""Adaptive attention span (Sukhbaatar, Grave, Bojanowski, Joulin, 2019; arXiv 1905.07799).

A sequential character Transformer (post-norm residual blocks, ReLU feed-forward) with

* learned relative position embeddings p_x (x = t - r), one set (d_h x S) shared by every head (and, as
  in the official code and the paper's parameter counts, every layer), added to the keys:
  s_tr = q_t . (k_r + p_{t-r}) / sqrt(d_h);
* a Transformer-XL cache of the hidden states entering each layer (no gradient flows into it);
* a span per head. ``fixed``: the last S tokens. ``adaptive``: the paper's soft mask
  m_z(x) = clamp((R + z - x) / R, 0, 1) with z = S z', z' in [0, 1] learned per head.
  ``dynamic``: z_t = S sigmoid(v . x_t + b), computed from the query's input x_t.
  The mask multiplies exp(s): a_tr = m(t - r) exp(s_tr) / sum_q m(t - q) exp(s_tq);
* the L1 span penalty lambda * z, returned as ``aux_loss`` for the trainer to add to the mean
  per-token NLL. ``loss_mode="mean_times_S"`` is the official code's lambda * S * mean_heads(z') per
  layer, summed over layers (what produced the published numbers); ``"sum"`` is lambda * sum of z over
  every head, as the paper's text writes it. The dynamic span penalises the mean z_t the same way.

Distances, ``window``. ``paper`` (the default): query t sees r = t - x for x = 0 .. S-1, itself and the
S - 1 previous tokens; the fixed span sees exactly S tokens, the mask formula applies to x = t - r as the
paper writes it, m_z(0) = 1, so no row is ever empty, and history missing before a stream's start is
padding that gets no weight. ``official`` (the code behind the published numbers): query t sees the S
previous tokens r = t - 1 .. t - S, not itself, with mask m_z(t - r - 1) and position embedding
p_{t-r-1}; history missing before a stream's start is zero hidden states that do take weight, as the
official code's zero-initialised cache (its keys and values are 0; a stream's first query sees only them).

Initialisation, ``init``. Both: embeddings and p_x ~ N(0, 1), the feed-forward and output layers at
PyTorch's defaults, z' = 0, b = -4 for the dynamic span. ``official`` (the default: the code that
produced the published numbers) leaves W_q, W_k, W_v, W_o at PyTorch's default U(+-1/sqrt(d)), d the
input width; ``paper`` draws them from U(+-1/sqrt(d_h)) as the paper's text says (sqrt(H) times wider).
At tiny scale the official one is worth about 0.16 bits (as-table1, adaptive-small).

Compute follows the spans: each layer attends over a band of W = min(S, ceil(max_head z + R)) distances
rounded up to a multiple of 64 (for dynamic spans, the largest z_t of the block), keys and cached states
beyond it are never projected, and the cache keeps W - 1 + 64 states (64 of slack for spans that grow).
Fixed and dynamic layers keep S - 1 states. Missing history (start of a stream, a cache shorter than
the band) is padding that gets no weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from repro.fields import later
from repro.models.base import ModelOutput
from repro.models.relative_attention import band_attention, chunk_size

TRIM_MULTIPLE = 64  # band widths and cache slack are multiples of this (coarse sizes reuse memory)


# The phrase of the paper's Figure 5 (dynamic span per character).
FIG5_TEXT = "overlooks the park and its numerous"


@dataclass
class SpanConfig:
    kind: Literal["fixed", "adaptive", "dynamic"] = "adaptive"
    limit: int = 8192  # S, the maximum span
    ramp: int = 32  # R, the width of the soft mask's ramp
    loss_coef: float = 2.0e-6  # lambda
    loss_mode: Literal["mean_times_S", "sum"] = "mean_times_S"
    init: float = 0.0  # initial z' (z = S z')
    dynamic_bias_init: float = -4.0  # b of z_t = S sigmoid(v . x_t + b)


@dataclass
class Config:
    layers: int = 12
    d_model: int = 512
    d_ff: int = 2048
    heads: int = 8
    dropout: float = 0.3  # on attention weights and ReLU outputs
    init: Literal["official", "paper"] = "official"  # W_q, W_k, W_v, W_o: see the module docstring
    window: Literal["paper", "official"] = later("paper")  # which distances a query sees: module docstring
    span: SpanConfig = field(default_factory=SpanConfig)


def soft_mask(x: torch.Tensor, z: torch.Tensor, ramp: float) -> torch.Tensor:
    """The soft mask m_z(x) = min(max((R + z - x) / R, 0), 1); x = t - r (distance); shapes broadcast."""
    return ((ramp + z - x) / ramp).clamp(0.0, 1.0)


def _round_up(n: float, multiple: int = TRIM_MULTIPLE) -> int:
    return multiple * math.ceil(math.ceil(n) / multiple)


class SpanAttention(nn.Module):
    """Multi-head attention of one layer over its (learned) span, with relative positions."""

    def __init__(self, cfg: Config):
        super().__init__()
        d, H = cfg.d_model, cfg.heads
        assert d % H == 0, "d_model must be a multiple of heads"
        self.H, self.dh, self.span, self.dropout = H, d // H, cfg.span, cfg.dropout
        self.shift = 1 if cfg.window == "official" else 0  # distance of the band's first column (x = 0)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        if cfg.init == "paper":  # W_q, W_k, W_v, W_o ~ U(-1/sqrt(d_h), 1/sqrt(d_h)); official: PyTorch's
            for lin in (self.q, self.k, self.v, self.o):
                nn.init.uniform_(lin.weight, -(self.dh**-0.5), self.dh**-0.5)
        if cfg.span.kind == "adaptive":
            self.z_prime = nn.Parameter(torch.full((H,), float(cfg.span.init)))
        elif cfg.span.kind == "dynamic":
            self.span_proj = nn.Linear(d, H)  # v (H x d), b (H)
            nn.init.constant_(self.span_proj.bias, cfg.span.dynamic_bias_init)
        self.trim = True
        self.record: list | None = None  # set to a list to collect attention weights (analysis)
        self.last: dict[str, Any] = {}

    def z(self) -> torch.Tensor:
        """Adaptive spans z = S z' in tokens, per head (z' clamped to [0, 1])."""
        return self.span.limit * self.z_prime.clamp(0.0, 1.0)

    def window(self, z_max: float | None = None) -> int:
        """W: distances 0..W-1 attended. Trimmed to the largest z + R (rounded up), at most S."""
        S = self.span.limit
        if not self.trim or self.span.kind == "fixed":
            return S
        if z_max is None:
            z_max = float(self.z().detach().max())
        return min(S, _round_up(z_max + self.span.ramp))

    def cache_len(self, z_max: float | None = None) -> int:
        """Past hidden states kept for the next block (one more under the official window)."""
        S = self.span.limit
        if self.span.kind == "adaptive" and self.trim:
            return min(S - 1, self.window(z_max) - 1 + TRIM_MULTIPLE) + self.shift
        return S - 1 + self.shift

    def forward(self, h, cache, pe, z_max: float | None = None):
        """``z_max``: this layer's largest adaptive z, if the caller already read it (one sync)."""
        B, M, _ = h.shape
        S, R, kind = self.span.limit, self.span.ramp, self.span.kind
        z_t = None
        if kind == "dynamic":
            z_t = S * torch.sigmoid(self.span_proj(h))  # (B, M, H)
            W = self.window(float(z_t.detach().max()))
        else:
            W = self.window(z_max)
        C = cache.shape[1]
        W_span = W
        if not self.shift:  # paper window: no band wider than the history (missing history gets no weight)
            W = min(W, C + M)
        P = W - 1
        # keys: the states at C - P - shift .. C + M - 1 - shift of [cache, block]; before a stream's start,
        # padding (no weight under the paper window, zero states under the official one)
        first = C - P - self.shift
        kv = torch.cat([cache, h], 1)[:, max(0, first) : C + M - self.shift]
        n_pad = max(0, -first)

        def heads(t):
            return t.view(B, -1, self.H, self.dh).transpose(1, 2)

        q = heads(self.q(h)) * self.dh**-0.5
        k, v = heads(self.k(kv)), heads(self.v(kv))
        if n_pad:
            k, v = F.pad(k, (0, 0, n_pad, 0)), F.pad(v, (0, 0, n_pad, 0))
        x = torch.arange(W - 1, -1, -1, device=h.device, dtype=h.dtype)  # distance of each band column
        if kind == "adaptive":
            mask = soft_mask(x, self.z()[:, None, None], R)  # (H, 1, W)
        elif kind == "dynamic":
            mask = soft_mask(x, z_t.transpose(1, 2)[..., None], R)  # (B, H, M, W)
        else:
            mask = None
        out = band_attention(
            q,
            k,
            v,
            pe[:, :W].flip(-1),
            chunk=chunk_size(M, W),
            mask=mask,
            n_invalid=0 if self.shift else n_pad,
            dropout=self.dropout,
            training=self.training,
            record=self.record,
        )
        out = self.o(out.transpose(1, 2).reshape(B, M, -1))
        self.last = {"window": W_span, "band": W}
        loss = None
        if kind == "adaptive":
            zp = S * self.z_prime  # raw z' so the penalty always has a gradient
            loss = zp.mean() if self.span.loss_mode == "mean_times_S" else zp.sum()
        elif kind == "dynamic":
            loss = z_t.mean() if self.span.loss_mode == "mean_times_S" else z_t.mean((0, 1)).sum()
            zd = z_t.detach()
            self.last.update(z=zd.mean((0, 1)), eff=(zd + R).clamp(max=S).mean((0, 1)), z_t=zd)
        keep = self.cache_len(z_max)
        new_cache = torch.cat([cache, h], 1)[:, max(0, C + M - keep) :].detach()
        return out, new_cache, loss


class Layer(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.attn = SpanAttention(cfg)
        self.ff1, self.ff2 = nn.Linear(cfg.d_model, cfg.d_ff), nn.Linear(cfg.d_ff, cfg.d_model)
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.dropout = cfg.dropout

    def forward(self, h, cache, pe, z_max=None):
        a, cache, loss = self.attn(h, cache, pe, z_max)
        h = self.norm1(h + a)
        f = self.ff2(F.dropout(F.relu(self.ff1(h)), self.dropout, self.training))
        return self.norm2(h + f), cache, loss


def _config(cfg) -> Config:
    if isinstance(cfg, Config):
        return cfg
    cfg = dict(cfg)  # a plain mapping (tests, notebooks); manifests arrive as a validated Config
    span = cfg.pop("span", {})
    return Config(**cfg, span=span if isinstance(span, SpanConfig) else SpanConfig(**span))


class Model(nn.Module):
    """The adaptive-span language model; state = per-layer caches of past hidden states (B, C, d)."""

    def __init__(self, cfg: Config, vocab_size: int, block: int, shape=None):
        super().__init__()
        self.cfg = cfg = _config(cfg)
        self.vocab_size, self.block = vocab_size, block
        self.emb = nn.Embedding(vocab_size + 1, cfg.d_model)  # + start token; N(0, 1)
        self.pe = nn.Parameter(torch.randn(cfg.d_model // cfg.heads, cfg.span.limit))  # p_x, N(0, 1)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.layers))
        self.out = nn.Linear(cfg.d_model, vocab_size)

    @property
    def trim(self) -> bool:
        return self.layers[0].attn.trim

    @trim.setter
    def trim(self, value: bool) -> None:
        for layer in self.layers:
            layer.attn.trim = bool(value)

    def init_state(self, batch_size: int, device) -> list[torch.Tensor]:
        w = self.emb.weight
        return [w.new_zeros(batch_size, 0, self.cfg.d_model, device=device) for _ in self.layers]

    def forward(self, x: torch.Tensor, state: Any = None) -> ModelOutput:
        if state is None:
            state = self.init_state(x.shape[0], x.device)
        h = self.emb(x)
        new_state, losses = [], []
        z_max = [None] * len(self.layers)
        if self.cfg.span.kind == "adaptive":  # every layer's largest z in one device sync
            with torch.no_grad():
                zp = torch.stack([layer.attn.z_prime.max() for layer in self.layers])
                z_max = (self.cfg.span.limit * zp.clamp(0.0, 1.0)).tolist()
        for layer, cache, zm in zip(self.layers, state, z_max):
            h, cache, loss = layer(h, cache.to(h.dtype), self.pe, zm)
            new_state.append(cache)
            losses.append(loss)
        aux = None
        if self.cfg.span.kind != "fixed":
            aux = self.cfg.span.loss_coef * torch.stack(losses).sum()
        return ModelOutput(self.out(h), new_state, aux)

    @torch.no_grad()
    def after_optimizer_step(self) -> None:
        """Keep z' in [0, 1] (call after every optimizer step)."""
        for layer in self.layers:
            if hasattr(layer.attn, "z_prime"):
                layer.attn.z_prime.clamp_(0.0, 1.0)

    def spans(self) -> tuple[list[list[float]], list[list[float]]]:
        """(z, effective span min(S, z + R)) per layer per head, in tokens. Dynamic: means over the
        last forward (before any forward: the initial z = S sigmoid(b))."""
        S, R, kind = self.cfg.span.limit, self.cfg.span.ramp, self.cfg.span.kind
        zs, effs = [], []
        for layer in self.layers:
            a = layer.attn
            if kind == "fixed":
                z = torch.full((self.cfg.heads,), float(S))
                eff = z
            elif kind == "adaptive":
                z = a.z().detach()
                eff = (z + R).clamp(max=S)
            elif "z" in a.last:
                z, eff = a.last["z"], a.last["eff"]
            else:
                z = S * torch.sigmoid(a.span_proj.bias.detach())
                eff = (z + R).clamp(max=S)
            zs.append([float(v) for v in z])
            effs.append([float(v) for v in eff])
        return zs, effs

    def span_metrics(self) -> dict[str, float]:
        """Per-head z in tokens as flat scalars (``span/l{layer}h{head}``), for step-wise logging."""
        return {f"span/l{i}h{j}": z for i, layer in enumerate(self.spans()[0]) for j, z in enumerate(layer)}

    def stats(self) -> dict[str, Any]:
        zs, effs = self.spans()
        flat = [e for layer in effs for e in layer]
        out = {
            "avg_span": sum(flat) / len(flat),
            "span_max": max(z for layer in zs for z in layer),  # the longest z of any head (tokens)
            "spans": zs,
            "effective_spans": effs,
            "span_limit": self.cfg.span.limit,
            "attention_window": [
                layer.attn.window() if self.cfg.span.kind != "dynamic" else layer.attn.last.get("window")
                for layer in self.layers
            ],
            "params": sum(p.numel() for p in self.parameters()),
            "flops_per_token": self.flops_per_token(),
        }
        L = len(zs)  # mean z of the lower and of the upper half of the layers (Figure 4's depth trend)
        out["span_lower_half"] = float(np.mean(zs[: L // 2])) if L > 1 else None
        out["span_upper_half"] = float(np.mean(zs[(L + 1) // 2 :])) if L > 1 else None
        if self.cfg.span.kind == "dynamic":
            out["dynamic_span_mean"] = float(np.mean([z for layer in zs for z in layer]))
        return out

    def analyses(self, data: np.ndarray, vocab: Any) -> dict[str, np.ndarray]:
        """Arrays behind the paper's figures, computed once after training (the runner stores them).

        ``attention_by_distance`` (Figure 1): one block of ``data`` read after S tokens have filled
        the cache; ``dynamic_spans`` (Figure 5, dynamic kind only): z_t at each character of the
        paper's phrase, read after the preceding S tokens of ``data``."""
        S, M = self.cfg.span.limit, self.block
        device = next(self.parameters()).device
        history = torch.as_tensor(np.asarray(data[: S + M], dtype=np.int64), device=device)[None]
        state = self.init_state(1, device)
        with torch.no_grad():
            for start in range(0, S, M):
                state = self(history[:, start : start + M], state).state
        out = {"attention_by_distance": attention_by_distance(self, history[:, S : S + M], state)}
        if self.cfg.span.kind == "dynamic":
            text = torch.as_tensor(np.asarray(vocab.encode(FIG5_TEXT), dtype=np.int64), device=device)
            out["dynamic_spans"] = dynamic_spans(self, text, state)
            out["dynamic_spans_text"] = np.array(list(FIG5_TEXT))
        return out

    def flops_per_token(self) -> float:
        from repro.flops import flops_per_token

        c = self.cfg
        return flops_per_token(
            layers=c.layers,
            d_model=c.d_model,
            d_ff=c.d_ff,
            heads=c.heads,
            vocab_size=self.vocab_size,
            spans=self.spans()[1],
        )


def _as_batch(x: torch.Tensor) -> torch.Tensor:
    return x[None] if x.dim() == 1 else x


@torch.no_grad()
def attention_by_distance(model: Model, x: torch.Tensor, state: Any = None) -> np.ndarray:
    """Mean attention weight at each distance 0..S-1 per layer and head (Figure 1): (layers, heads, S).

    Averages over batch and queries that can see that distance; NaN where none can (short history). Under
    the official window distance 0 (the query itself) has weight 0 and distance S lies beyond the array."""
    S, was_training = model.cfg.span.limit, model.training
    model.eval()
    for layer in model.layers:
        layer.attn.record = []
    try:
        model(_as_batch(x), state)
        out = np.full((len(model.layers), model.cfg.heads, S), np.nan)
        for i, layer in enumerate(model.layers):
            rec = layer.attn.record[0]
            s, n = rec["sum"].flip(-1).double(), rec["count"].flip(-1).double()  # distance - shift order
            W, W_span, shift = s.shape[-1], layer.attn.last["window"], layer.attn.shift
            weights = torch.where(n > 0, s / n.clamp(min=1), torch.nan).numpy()
            out[i, :, shift : shift + W] = weights[..., : S - shift]
            out[i, :, :shift] = 0.0  # the official window never attends the query itself
            out[i, :, W_span + shift :] = 0.0  # beyond the span every weight is exactly 0
        return out
    finally:
        for layer in model.layers:
            layer.attn.record = None
        model.train(was_training)


@torch.no_grad()
def dynamic_spans(model: Model, x: torch.Tensor, state: Any = None) -> np.ndarray:
    """Dynamic span z_t at each position of ``x``, averaged over layers, heads and batch (Figure 5): (T,)."""
    if model.cfg.span.kind != "dynamic":
        raise ValueError("dynamic_spans needs a model with span.kind = 'dynamic'")
    was_training = model.training
    model.eval()
    try:
        model(_as_batch(x), state)
        z = torch.stack([layer.attn.last["z_t"] for layer in model.layers])  # (L, B, T, H)
        return z.mean((0, 1, 3)).double().numpy()
    finally:
        model.train(was_training)
