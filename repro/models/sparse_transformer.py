"""The Sparse Transformer model family (Child et al. 2019); with ``pattern: dense`` it is the suite's
dense Transformer baseline (one model, not two).

Pre-norm residual blocks in the paper's form::

    a(H) = dropout(attention(norm(H)))
    b(H) = dropout(ff(norm(H + a(H))))
    H'   = H + a(H) + b(H)

with ff(x) = W2 f(W1 x + b1) + b2, f(x) = x * sigmoid(1.702 x); learned position embeddings: ``attn``
(row = i // l and column = i mod l, text/audio) or ``data`` (row, column, channel of an image);
attention through :func:`repro.models.kernels.attend` (dense, strided, fixed; interleaved, merged,
multihead).

Initialisation, ``init``. ``normal`` (the default): every weight and embedding N(0, init_std), W2 and Wp
N(0, init_std / sqrt(2N)) (N = layers), biases 0. ``paper`` (section 6 of the paper): the token embedding
N(0, 0.125 / sqrt(d)), each of the n_emb position embeddings N(0, 0.125 / sqrt(d n_emb)), every weight of
attention and feed-forward N(0, 0.125 / sqrt(d_in)) with W2 and Wp further scaled by 1 / sqrt(2N), biases
0, and the output (logit) layer 0. Dropout: at the end of each residual branch, and on the summed
embeddings unless ``dropout_embedding`` is off (the paper drops only the residual branches).
Stateless across blocks: ``state`` is ignored and returned as ``None``. :meth:`Model.step` decodes
one position with cached keys and values (``repro.sample.sampling``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from repro.config.families import SparseTransformerConfig as Config
from repro.models import patterns as P
from repro.models.base import LanguageModel, ModelOutput, normal_init
from repro.models.kernels import attend

FIG2_QUERY = (20, 14)  # (row, column) of the query pixel of Figure 2's attention maps


def gelu_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """The paper's GELU approximation x * sigmoid(1.702 x)."""
    return x * torch.sigmoid(1.702 * x)


def row_column(positions: torch.Tensor, stride: int, rows: int) -> list[torch.Tensor]:
    """The ``attn`` position embedding's indices of positions i: row i // l (at most ``rows`` - 1) and column
    i mod l, l = ``stride``: one embedding per row and one per column of the factorised pattern."""
    return [(positions // stride).clamp_max(rows - 1), positions % stride]


class Attention(nn.Module):
    def __init__(self, cfg: Config, pattern: str):
        super().__init__()
        self.cfg, self.pattern, self.heads = cfg, pattern, cfg.heads
        dqk = int(round(cfg.d_model * cfg.qk_mult))
        if dqk % cfg.heads or cfg.d_model % cfg.heads:
            raise ValueError(f"d_model={cfg.d_model} and qk width {dqk} must be divisible by heads={cfg.heads}")
        self.dqk = dqk
        self.q = nn.Linear(cfg.d_model, dqk)
        self.k = nn.Linear(cfg.d_model, dqk)
        self.v = nn.Linear(cfg.d_model, cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)  # Wp
        self.per_head = P.layer_heads(pattern, cfg.combine, cfg.heads)  # (pattern, summary rank) per head

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        return x.view(B, T, self.heads, D // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        o = attend(q, k, v, self.pattern, self.cfg.stride, self.cfg.c, combine=self.cfg.combine, impl=self.cfg.impl)
        return self.proj(o.transpose(1, 2).reshape(B, T, -1))

    def step(self, x: torch.Tensor, cache: dict, t: int) -> torch.Tensor:
        """x (B, 1, D) at position t; cache holds this layer's keys/values (B, H, t, d) and grows."""
        B = x.shape[0]
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        if "k" in cache:
            k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
        cache["k"], cache["v"] = k, v
        mask = torch.from_numpy(
            np.stack([P.allowed_row(p, t, self.cfg.stride, self.cfg.c, head=h) for p, h in self.per_head])
        ).to(x.device)  # (H, t+1)
        if q.dtype in (torch.float16, torch.bfloat16):  # q.k in fp32 when sampling
            q, k = q.float(), k.float()
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~mask[None, :, None, :], float("-inf"))
        empty = ~mask.any(-1)[None, :, None, None]
        p = torch.softmax(s.masked_fill(empty, 0.0), -1).masked_fill(empty, 0.0)
        o = (p.to(v.dtype) @ v).transpose(1, 2).reshape(B, 1, -1)
        return self.proj(o)


class ResidualBlock(nn.Module):
    def __init__(self, cfg: Config, pattern: str):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg, pattern)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        d_ff = int(round(cfg.d_model * cfg.ff_mult))
        self.w1 = nn.Linear(cfg.d_model, d_ff)
        self.w2 = nn.Linear(d_ff, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def ff(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(gelu_sigmoid(self.w1(x)))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        a = self.drop(self.attn(self.norm1(h)))
        b = self.drop(self.ff(self.norm2(h + a)))
        return h + a + b

    def step(self, h: torch.Tensor, cache: dict, t: int) -> torch.Tensor:
        a = self.drop(self.attn.step(self.norm1(h), cache, t))
        b = self.drop(self.ff(self.norm2(h + a)))
        return h + a + b


class Model(LanguageModel):
    def __init__(self, cfg: Config, vocab_size: int, block: int, shape: tuple[int, int, int] | None = None):
        super().__init__()
        if cfg.embedding == "data" and shape is None:
            raise ValueError("embedding='data' needs the data's (rows, cols, channels) shape (image data)")
        self.cfg, self.vocab_size, self.block, self.shape = cfg, vocab_size, block, shape
        d = cfg.d_model
        self.tok = nn.Embedding(vocab_size + 1, d)  # + start token
        if cfg.embedding == "attn":
            self.pos = nn.ModuleList([nn.Embedding(math.ceil(block / cfg.stride), d), nn.Embedding(cfg.stride, d)])
        else:
            rows, cols, ch = shape
            self.pos = nn.ModuleList([nn.Embedding(rows, d), nn.Embedding(cols, d), nn.Embedding(ch, d)])
        self.layer_patterns = P.layer_patterns(cfg.pattern, cfg.combine, cfg.layers)
        self.blocks = nn.ModuleList([ResidualBlock(cfg, p) for p in self.layer_patterns])
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab_size)
        self.drop = nn.Dropout(cfg.dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.cfg.init == "paper":
            self._init_paper()
            return
        residual = [w for b in self.blocks for w in (b.w2, b.attn.proj)]
        normal_init(self, self.cfg.init_std, self.cfg.layers, residual)

    @torch.no_grad()
    def _init_paper(self) -> None:
        d, residual = self.cfg.d_model, 1.0 / math.sqrt(2 * self.cfg.layers)
        nn.init.normal_(self.tok.weight, 0.0, 0.125 / math.sqrt(d))
        for emb in self.pos:
            nn.init.normal_(emb.weight, 0.0, 0.125 / math.sqrt(d * len(self.pos)))
        for b in self.blocks:
            for lin in (b.attn.q, b.attn.k, b.attn.v, b.attn.proj, b.w1, b.w2):
                nn.init.normal_(lin.weight, 0.0, 0.125 / math.sqrt(lin.in_features))
                nn.init.zeros_(lin.bias)
            b.w2.weight.mul_(residual)
            b.attn.proj.weight.mul_(residual)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def position_indices(self, positions: torch.Tensor) -> list[torch.Tensor]:
        if self.cfg.embedding == "attn":
            return row_column(positions, self.cfg.stride, self.pos[0].num_embeddings)
        rows, cols, ch = self.shape
        p = positions % (rows * cols * ch)
        return [p // (cols * ch), (p // ch) % cols, p % ch]

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        h = self.tok(x)
        for emb, idx in zip(self.pos, self.position_indices(positions)):
            h = h + emb(idx)
        return h

    def forward(self, x: torch.Tensor, state: Any = None) -> ModelOutput:
        T = x.shape[1]
        h = self.embed(x, torch.arange(T, device=x.device))
        if self.cfg.dropout_embedding:
            h = self.drop(h)
        for blk in self.blocks:
            if self.cfg.checkpointing and self.training and torch.is_grad_enabled():
                h = checkpoint(blk, h, use_reentrant=False)
            else:
                h = blk(h)
        return ModelOutput(logits=self.out(self.norm(h)), state=None, aux_loss=None)

    @torch.no_grad()
    def prefill(self, ctx: torch.Tensor) -> tuple[torch.Tensor, list[dict]]:
        return self.prefill_by_steps(ctx)  # the key/value cache is built token by token

    def step(self, x: torch.Tensor, cache: list[dict] | None, t: int) -> tuple[torch.Tensor, list[dict]]:
        """Logits (B, vocab) for the token x (B,) at position t, given the cache of positions < t."""
        cache = cache if cache is not None else [{} for _ in self.blocks]
        h = self.embed(x[:, None], torch.full((1,), t, device=x.device, dtype=torch.long))
        for blk, c in zip(self.blocks, cache):
            h = blk.step(h, c, t)
        return self.out(self.norm(h))[:, 0], cache

    @torch.no_grad()
    def analyses(self, data: np.ndarray, vocab: Any) -> dict[str, np.ndarray]:
        """Arrays behind the paper's Figure 2, computed once after training (the runner stores them).

        ``attention_query`` (layers, heads, i + 1): the attention weights of one query position i over
        the inputs 0..i, in every layer and head, as the layer's pattern allows them (softmax of
        q.k / sqrt(d) over the allowed keys). Whole sequences (images, audio): the first sequence of
        ``data`` fed after the start token, so input j holds element j - 1 and query i predicts element
        i; for images i is the pixel at row 20, column 14 (first channel), clipped to the image. Text:
        the first ``block`` tokens of ``data``, query = the last position."""
        device = next(self.parameters()).device
        if data.ndim == 2:
            seq = np.asarray(data[0][: self.block], dtype=np.int64)
            x = np.concatenate([[self.vocab_size], seq[:-1]])
            if self.shape is not None:
                rows, cols, ch = self.shape
                query = (min(FIG2_QUERY[0], rows - 1) * cols + min(FIG2_QUERY[1], cols - 1)) * ch
            else:
                query = len(x) - 1
        else:
            seq = x = np.asarray(data[: self.block], dtype=np.int64)
            query = len(x) - 1
        was_training = self.training
        self.eval()
        xt = torch.as_tensor(x, device=device)[None]
        h = self.embed(xt, torch.arange(xt.shape[1], device=device))
        maps = []
        for blk in self.blocks:
            att = blk.attn
            z = blk.norm1(h)
            q = att._split(att.q(z))[0, :, query].float()  # (H, d)
            k = att._split(att.k(z))[0, :, : query + 1].float()  # (H, i + 1, d)
            s = torch.einsum("hd,hjd->hj", q, k) / math.sqrt(q.shape[-1])
            mask = torch.from_numpy(
                np.stack([P.allowed_row(p, query, self.cfg.stride, self.cfg.c, head=hd) for p, hd in att.per_head])
            ).to(device)
            p = torch.softmax(s.masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0)
            maps.append(p.cpu().numpy())
            h = blk(h)
        self.train(was_training)
        return {
            "attention_query": np.stack(maps).astype(np.float32),
            "query_position": np.array(query),
            "sequence": seq.astype(np.int64),
            "shape": np.array(self.shape or (0, 0, 0)),
            "layer_patterns": np.array(self.layer_patterns),
        }

    def stats(self) -> dict[str, Any]:
        return {
            "params": sum(p.numel() for p in self.parameters()),
            "attn_keys_per_query": self.keys_per_query(),
            "layer_patterns": list(self.layer_patterns),
        }

    def keys_per_query(self) -> float:
        """Allowed keys per query, averaged over the positions of a block, the heads and the layers."""
        cfg = self.cfg
        return float(
            np.mean(
                [P.layer_keys(p, cfg.combine, cfg.heads, self.block, cfg.stride, cfg.c) for p in self.layer_patterns]
            )
        )

    def flops_per_token(self) -> float:
        """Forward FLOPs per predicted token (2 per multiply-accumulate): the dense matmuls (q, k, v,
        Wp, W1, W2 per layer and the output layer) plus q.k and p.v over the pattern's actual number
        of keys per query, averaged over the positions of a block."""
        cfg, d = self.cfg, self.cfg.d_model
        dqk = int(round(d * cfg.qk_mult))
        d_ff = int(round(d * cfg.ff_mult))
        dense = cfg.layers * (2 * d * dqk + 2 * d * d + 2 * d * d_ff) + d * self.vocab_size
        attn = cfg.layers * self.keys_per_query() * (dqk + d)
        return float(2 * (dense + attn))
