"""An official checkpoint's tensors in the suite's adaptive-span model (:mod:`repro.models.adaptive_span`).

The two models compute the same function once the suite's runs the official variant of its choices
(``model.window: past``: query t sees t-1 .. t-S, distances counted from the previous token, zero states
before a stream's start; ``model.mask_norm: official``: softmax, then the mask, then renormalised), and
the tensors are put where the suite keeps them:

* the span: the official ``current_val`` is z / S per head, the suite's ``z_prime`` (z = S z', eq. 4's
  mask m_z(x) = clamp((R + z - x) / R, 0, 1) in both, the official code writing it as
  clamp((x' + z' S) / R + 1) over its template x' = -(S - 1) .. 0);
* the position embeddings: the official ``key_pe[0, :, c]`` scores the key at distance S - c from the
  query; the suite's ``pe[:, x]`` the key at distance x + 1 under ``past``: ``pe = key_pe[0].flip(-1)``;
* ``proj_{query,key,val,out}`` -> ``q, k, v, o``; ``ff.fc1/fc2`` -> ``ff1/ff2``; ``norm1/2`` as they are
  (both post-norm: LayerNorm(h + attention), LayerNorm(h + feed-forward));
* the input and output embeddings with their rows permuted from the official numbering to the model's
  (:mod:`repro.pretrained.symbols`); the suite's extra start-token row (unused by text) is zero.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from repro.models.adaptive_span import Model
from repro.pretrained.checkpoint import MASK, OfficialCheckpoint

PROJECTIONS = {"query": "q", "key": "k", "val": "v", "out": "o"}


def model_section(ckpt: OfficialCheckpoint, *, ramp: int, dropout: float, loss_coef: float, init: float) -> dict:
    """The suite's ``model`` section of the checkpoint: its shapes, and the flags the shapes do not hold
    (the ramp R, dropout, lambda and the initial span ratio, as it was trained)."""
    s = ckpt.shape
    return {
        "family": "adaptive_span",
        "layers": s.layers,
        "d_model": s.d_model,
        "d_ff": s.d_ff,
        "heads": s.heads,
        "dropout": dropout,
        "init": "official",
        "window": "past",
        "mask_norm": "official",
        "span": {
            "kind": "adaptive" if s.adaptive else "fixed",
            "limit": s.limit,
            "ramp": ramp,
            "loss_coef": loss_coef,
            "loss_mode": "mean_times_S",
            "init": init,
        },
    }


def suite_state(ckpt: OfficialCheckpoint, order: np.ndarray, vocab_size: int) -> dict[str, torch.Tensor]:
    """The suite model's state dict; ``order``: the model id of each official id (its rows' permutation)."""
    t, s = ckpt.tensors, ckpt.shape
    rows = torch.as_tensor(order, dtype=torch.long)
    emb = torch.zeros(vocab_size + 1, s.d_model)  # + the start token's row
    emb[rows] = t["in_emb.weight"].float()
    out_w, out_b = torch.zeros(vocab_size, s.d_model), torch.zeros(vocab_size)
    out_w[rows], out_b[rows] = t["out_emb.weight"].float(), t["out_emb.bias"].float()
    state = {"pe": t["key_pe"][0].flip(-1), "emb.weight": emb, "out.weight": out_w, "out.bias": out_b}
    for i in range(s.layers):
        src, dst = f"layers.{i}.", f"layers.{i}."
        if s.adaptive:
            state[f"{dst}attn.z_prime"] = t[f"{src}{MASK}.current_val"].reshape(s.heads)
        for official, ours in PROJECTIONS.items():
            state[f"{dst}attn.{ours}.weight"] = t[f"{src}attn.proj_{official}.weight"]
        for n in (1, 2):
            for p in ("weight", "bias"):
                state[f"{dst}ff{n}.{p}"] = t[f"{src}ff.fc{n}.{p}"]
                state[f"{dst}norm{n}.{p}"] = t[f"{src}norm{n}.{p}"]
    return {k: v.float().contiguous() for k, v in state.items()}


def build(ckpt: OfficialCheckpoint, section: dict[str, Any], order: np.ndarray, vocab_size: int, block: int) -> Model:
    """The suite's model with the checkpoint's weights, in eval mode (every key loaded, strictly)."""
    cfg = {k: v for k, v in section.items() if k != "family"}
    model = Model(cfg, vocab_size, block)
    model.load_state_dict(suite_state(ckpt, order, vocab_size), strict=True)
    return model.eval()
