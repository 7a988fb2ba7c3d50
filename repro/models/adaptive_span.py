"""The adaptive-span language model (Sukhbaatar, Grave, Bojanowski, Joulin, 2019; arXiv 1905.07799).

A sequential character Transformer (post-norm residual blocks, ReLU feed-forward) whose attention uses the
span mechanism of :mod:`repro.models.span` (the soft mask, the three span kinds, the span loss, trimming):

* learned relative position embeddings p_x (x = t - r), one set (d_h x S) shared by every head (and, as
  in the official code and the paper's parameter counts, every layer), added to the keys:
  s_tr = q_t . (k_r + p_{t-r}) / sqrt(d_h);
* a Transformer-XL cache of the hidden states entering each layer (no gradient flows into it);
* a span per head (``span.kind``: fixed, adaptive or dynamic); the mask multiplies exp(s):
  a_tr = m(t - r) exp(s_tr) / sum_q m(t - q) exp(s_tq); the span loss lambda * sum over layers is
  returned as ``aux_loss`` for the trainer to add to the mean per-token NLL.

Distances, ``window`` (what the paper writes, what the official code does). Eq. 5 normalises over the
S keys r = t-S .. t-1 before the query, and eq. 4's mask is a function of the distance x = t - r.
``past``: exactly eq. 5's range, as the official code (facebookresearch/adaptive-span) computes it: query
t sees r = t-1 .. t-S, not itself, with mask m_z(t - r - 1) and position embedding p_{t-r-1} (the
official code's distance counts from the previous token); history missing before a stream's start is
zero hidden states that do take weight, as the official code's zero-initialised cache (their keys and
values are 0; a stream's first query sees only them). ``self_and_past`` (the default, under which the
stored runs trained): query t sees r = t - x for x = 0 .. S-1, itself and the S - 1 previous tokens,
with m_z(x) and p_x as eq. 4 writes the distance, so m_z(0) = 1 and no row is ever empty, and history
missing before a stream's start is padding that gets no weight. The fixed span sees exactly S tokens
under either. (Before 2026-12-03 the two were named ``official`` and ``paper``; those names are still read,
and run ids hash them.) :mod:`repro.models.span_reference` writes both as eq. 5 over every pair.

Normalisation, ``mask_norm``. ``eq5`` (the default, under which the stored runs trained): the mask
joins the scores, a = softmax(s + log m) = m exp(s) / sum m exp(s), eq. 5 exactly. ``official``: the
official code's order, p = softmax(s) over the attended band, then a = m p / (sum m p + 1e-8); the same
weights but for the 1e-8, which weighs where sum m p is small (a short span whose band's softmax mass lies
beyond it). The imported official models run it (:mod:`repro.pretrained`); the dynamic span has no
official counterpart and keeps ``eq5``.

Initialisation, ``init``. Both: embeddings and p_x ~ N(0, 1), the feed-forward and output layers at
PyTorch's defaults, z' = 0, b = -4 for the dynamic span. ``official`` (the default: the code that
produced the published numbers) leaves W_q, W_k, W_v, W_o at PyTorch's default U(+-1/sqrt(d)), d the
input width; ``paper`` draws them from U(+-1/sqrt(d_h)) as the paper's text says (sqrt(H) times wider).
At tiny scale the official one is worth about 0.16 bits (as-table1, adaptive-small).

Compute follows the spans: each layer attends over the band of W distances of the trimming rule
(:func:`repro.models.span.trimmed_window`; for dynamic spans, from the largest z_t of the block), keys and
cached states beyond it are never projected, and the cache keeps what the span kind asks for. Missing
history (start of a stream, a cache shorter than the band) is padding that gets no weight.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from repro.config.families import AdaptiveSpanConfig as Config
from repro.config.families import SpanConfig  # noqa: F401  (its span section, for callers beside Config)
from repro.models.base import LanguageModel, ModelOutput
from repro.models.flops import flops_per_token
from repro.models.relative_attention import BandSoftmax, band_attention, bucketed_attention, chunk_size
from repro.models.span import make_span, span_statistics

OFFICIAL_EPS = 1e-8  # what the official code adds to sum m p before dividing (mask_norm: official)


class AttentionOutput(NamedTuple):
    out: torch.Tensor  # (B, T, d_model)
    cache: torch.Tensor  # the states kept for the next block
    loss: torch.Tensor | None  # this layer's span penalty, before lambda (None: fixed span)
    z: torch.Tensor | None  # the block's spans, detached: (H,), (B, T, H) per query, or None (fixed)
    window: int  # W, the distances the spans need (the band is narrower while the history is shorter)


_COMPILED: dict[Any, Any] = {}


RECOMPILES = 64  # compiled shapes per function: band widths W (multiples of 64) x start-of-stream lengths


def compiled(fn):
    """``fn`` under torch.compile, one compiled function per ``fn`` for every layer and model (torch._dynamo
    is imported here, on first use: processes that do not compile never load it). Static shapes: each
    band width and history length is compiled once, when first met (a run meets a few; the kernels of
    fixed sizes are the fast ones), up to :data:`RECOMPILES`, beyond which new shapes run eager."""
    if fn not in _COMPILED:
        import torch._dynamo

        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILES)
        _COMPILED[fn] = torch.compile(fn, dynamic=False)
    return _COMPILED[fn]


class SpanAttention(nn.Module):
    """Multi-head attention of one layer over its (learned) span, with relative positions.

    Analyses read it through forward hooks: its output (:class:`AttentionOutput`) and ``softmax``, whose
    output is the layer's attention weights over the band (see ``repro.train.figure_arrays``)."""

    def __init__(self, cfg: Config):
        super().__init__()
        d, H = cfg.d_model, cfg.heads
        assert d % H == 0, "d_model must be a multiple of heads"
        self.H, self.dh, self.dropout = H, d // H, cfg.dropout
        self.shift = 1 if cfg.window == "past" else 0  # distance of the band's first column (x = 0)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        if cfg.init == "paper":  # W_q, W_k, W_v, W_o ~ U(-1/sqrt(d_h), 1/sqrt(d_h)); official: PyTorch's
            for lin in (self.q, self.k, self.v, self.o):
                nn.init.uniform_(lin.weight, -(self.dh**-0.5), self.dh**-0.5)
        self.span = make_span(cfg.span, H)
        self.span.add_parameters(self, d)  # z_prime or span_proj, registered after q, k, v, o
        self.softmax = BandSoftmax()
        self.renormalise = OFFICIAL_EPS if cfg.mask_norm == "official" else None
        self.trim = True  # False: attend and cache the whole S whatever the spans (a reference for tests)
        # per-query spans: each query attends over the distances its span needs (bucketed), not the band
        # of the block's largest span; False: one band (the probes read its weights)
        self.bucketed = True
        self.compiled = cfg.compile  # train the band and the layer's feed-forward under torch.compile

    def window(self, z: torch.Tensor | None = None, z_max: float | None = None) -> int:
        """W: distances 0..W-1 attended for spans ``z`` (default: those known before a block), at most S."""
        if not self.trim:
            return self.span.S
        return self.span.window(self.span.z(self) if z is None else z, z_max)

    def cache_len(self, window: int | None = None) -> int:
        """Past hidden states kept for the next block (one more under the ``past`` window)."""
        kept = self.span.cache_len(self.window() if window is None else window) if self.trim else self.span.S - 1
        return kept + self.shift

    def _qkv(self, h, past, now, n_pad: int):
        """Queries (scaled) of the block ``h``; keys and values of ``n_pad`` padding states, the cached
        states ``past`` and the block's ``now``: (B, H, T, d_h), (B, H, n_pad + |past| + |now|, d_h) twice."""
        B = h.shape[0]

        def heads(t):
            return t.view(B, -1, self.H, self.dh).transpose(1, 2)

        q = heads(self.q(h)) * self.dh**-0.5
        # the cached states are projected apart from the block's: no gradient flows into them, so
        # their backward is the weights' share alone
        k, v = (heads(torch.cat([lin(past), lin(now)], 1)) for lin in (self.k, self.v))
        if n_pad:
            k, v = F.pad(k, (0, 0, n_pad, 0)), F.pad(v, (0, 0, n_pad, 0))
        return q, k, v

    def _common(self, n_pad: int) -> dict[str, Any]:
        return dict(n_invalid=0 if self.shift else n_pad, dropout=self.dropout, training=self.training)

    def _merged(self, out):
        """The heads' outputs (B, H, T, d_h) through W_o: (B, T, d_model)."""
        B, _, T, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(B, T, -1))

    def _band(self, h, past, now, pe, z, W: int, n_pad: int):
        """Every query over the band of W distances, masked by the spans per head (if any). What
        torch.compile traces: tensors and integers in, no size that depends on a tensor's values."""
        q, k, v = self._qkv(h, past, now, n_pad)
        x = torch.arange(W - 1, -1, -1, device=h.device, dtype=h.dtype)  # distance of each band column
        out = band_attention(
            q,
            k,
            v,
            pe[:, :W].flip(-1),
            chunk=chunk_size(h.shape[1], W),
            mask=self.span.mask(x, z),
            softmax=self.softmax,
            renormalise=self.renormalise,
            **self._common(n_pad),
        )
        return self._merged(out)

    def _bucketed(self, h, past, now, pe, z, W: int, n_pad: int):
        """Per-query spans: query t gives weight to the distances x < z_t + R only (always eager: the
        buckets' sizes depend on the spans)."""
        q, k, v = self._qkv(h, past, now, n_pad)
        z_rows = z.transpose(1, 2).reshape(-1)  # (B H T,): the spans of the flattened queries
        out = bucketed_attention(
            q,
            k,
            v,
            pe[:, :W].flip(-1),
            need=(z.transpose(1, 2).detach() + self.span.R).ceil().clamp(1, W),
            mask_of=lambda x, rows: self.span.row_mask(x, z_rows[rows]),
            softmax=self.softmax,
            **self._common(n_pad),
        )
        return self._merged(out)

    def forward(self, h, cache, pe, z_max: float | None = None) -> AttentionOutput:
        """``z_max``: this layer's largest span, if the caller already read it (one device sync)."""
        T = h.shape[1]
        z = self.span.z(self, h)
        W = window = self.window(z, z_max)
        C = cache.shape[1]
        if not self.shift:  # self_and_past: no band wider than the history (missing history gets no weight)
            W = min(W, C + T)
        P = W - 1
        # keys: the states at C - P - shift .. C + T - 1 - shift of [cache, block]; before a stream's start,
        # padding (no weight under self_and_past, zero states under past)
        first = C - P - self.shift
        past, now = cache[:, max(0, first) :], h[:, : T - self.shift]
        n_pad = max(0, -first)
        if self.span.per_query and self.bucketed and self.trim:
            out = self._bucketed(h, past, now, pe, z, W, n_pad)
        else:  # under torch.compile while training (model.compile), else eager
            band = compiled(SpanAttention._band) if self.compiled and self.training else SpanAttention._band
            out = band(self, h, past, now, pe, z, W, n_pad)
        new_cache = torch.cat([cache, h], 1)[:, max(0, C + T - self.cache_len(window)) :].detach()
        return AttentionOutput(out, new_cache, self.span.loss(self, z), None if z is None else z.detach(), window)


class Layer(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.attn = SpanAttention(cfg)
        self.ff1, self.ff2 = nn.Linear(cfg.d_model, cfg.d_ff), nn.Linear(cfg.d_ff, cfg.d_model)
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.dropout = cfg.dropout

    def forward(self, h, cache, pe, z_max=None) -> tuple[torch.Tensor, AttentionOutput]:
        att = self.attn(h, cache, pe, z_max)
        mix = compiled(Layer._mix) if self.attn.compiled and self.training else Layer._mix
        return mix(self, h, att.out), att

    def _mix(self, h, att_out):
        """The residual sums, layer norms and feed-forward after the attention."""
        h = self.norm1(h + att_out)
        f = self.ff2(F.dropout(F.relu(self.ff1(h)), self.dropout, self.training))
        return self.norm2(h + f)


class Model(LanguageModel):
    """The adaptive-span language model; state = per-layer caches of past hidden states (B, C, d)."""

    def __init__(self, cfg: Config, vocab_size: int, block: int, shape=None):
        super().__init__()
        # a plain mapping (tests, notebooks) is validated; manifests arrive as a validated Config
        self.cfg = cfg = cfg if isinstance(cfg, Config) else Config.model_validate(cfg)
        self.vocab_size, self.block = vocab_size, block
        self.emb = nn.Embedding(vocab_size + 1, cfg.d_model)  # + start token; N(0, 1)
        self.pe = nn.Parameter(torch.randn(cfg.d_model // cfg.heads, cfg.span.limit))  # p_x, N(0, 1)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.layers))
        self.out = nn.Linear(cfg.d_model, vocab_size)
        # each layer's (z, window) in the latest forward: what the statistics of per-query spans describe
        self.latest_spans: list[tuple[torch.Tensor | None, int | None]] = [(None, None)] * cfg.layers

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

    @torch.no_grad()
    def _known_z_max(self) -> list[float | None]:
        """Each layer's largest span known before the block (adaptive), read in one device sync."""
        zs = [layer.attn.span.z(layer.attn) for layer in self.layers]
        known = [z.max() for z in zs if z is not None]
        values = iter(torch.stack(known).tolist() if known else [])
        return [None if z is None else next(values) for z in zs]

    def forward(self, x: torch.Tensor, state: Any = None) -> ModelOutput:
        if state is None:
            state = self.init_state(x.shape[0], x.device)
        h = self.emb(x)
        new_state, losses, seen = [], [], []
        for layer, cache, z_max in zip(self.layers, state, self._known_z_max()):
            h, att = layer(h, cache.to(h.dtype), self.pe, z_max)
            new_state.append(att.cache)
            losses.append(att.loss)
            seen.append((att.z, att.window))
        self.latest_spans = seen
        penalties = [loss for loss in losses if loss is not None]
        aux = self.cfg.span.loss_coef * torch.stack(penalties).sum() if penalties else None
        return ModelOutput(self.out(h), new_state, aux)

    def after_optimizer_step(self) -> None:
        """Keep the span parameters in their domain, z' in [0, 1] (call after every optimizer step)."""
        for layer in self.layers:
            layer.attn.span.constrain(layer.attn)

    def spans(self) -> tuple[list[list[float]], list[list[float]]]:
        """(z, effective span min(S, z + R)) per layer per head, in tokens. Dynamic: means over the
        latest forward (before any forward: the initial z = S sigmoid(b))."""
        zs, effs = [], []
        for layer, (z_seen, _) in zip(self.layers, self.latest_spans):
            z, eff = layer.attn.span.head_spans(layer.attn, z_seen)
            zs.append([float(v) for v in z])
            effs.append([float(v) for v in eff])
        return zs, effs

    def stats(self) -> dict[str, Any]:
        zs, effs = self.spans()
        per_query = self.layers[0].attn.span.per_query
        out = span_statistics(zs, effs, self.cfg.span.limit)
        halves = {k: out.pop(k) for k in ("span_lower_half", "span_upper_half")}  # after the others, as ever
        out.update(
            attention_window=[  # per-query spans: the latest block's (None before any)
                window if per_query else layer.attn.window()
                for layer, (_, window) in zip(self.layers, self.latest_spans)
            ],
            params=sum(p.numel() for p in self.parameters()),
            flops_per_token=self.flops_per_token(),
            **halves,
        )
        if per_query:
            out["dynamic_span_mean"] = float(np.mean([z for layer in zs for z in layer]))
        return out

    def flops_per_token(self) -> float:
        c = self.cfg
        return flops_per_token(
            layers=c.layers,
            d_model=c.d_model,
            d_ff=c.d_ff,
            heads=c.heads,
            vocab_size=self.vocab_size,
            spans=self.spans()[1],
        )
