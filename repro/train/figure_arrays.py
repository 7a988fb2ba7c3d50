"""Arrays behind the figures that need a trained model, computed once by the runner after training and
stored as the run's ``analysis.npz`` (renderers read that file and never load a model).

:func:`figure_arrays` picks the model family's probe. The adaptive-span probes read the model through
forward hooks, never through state left on it: each layer's attention weights (the output of its
attention's ``softmax``) and each layer's spans and window (its attention's ``AttentionOutput``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from repro.models.relative_attention import as_band

# The phrase of the adaptive-span paper's Figure 5 (dynamic span per character).
FIG5_TEXT = "overlooks the park and its numerous"


def _as_batch(x: torch.Tensor) -> torch.Tensor:
    return x[None] if x.dim() == 1 else x


def _hooked_forward(model, x, state, hooks: list[tuple[torch.nn.Module, Callable]]) -> None:
    """One forward of ``model`` in eval mode with ``hooks`` (module, forward hook) attached for its duration."""
    was_training = model.training
    model.eval()
    handles = [module.register_forward_hook(hook) for module, hook in hooks]
    try:
        model(_as_batch(x), state)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)


@torch.no_grad()
def attention_by_distance(model, x: torch.Tensor, state: Any = None) -> np.ndarray:
    """Mean attention weight at each distance 0..S-1 per layer and head (Figure 1): (layers, heads, S).

    Averages over batch and queries that can see that distance; NaN where none can (short history). Under
    the past window (eq. 5's range) distance 0 (the query itself) has weight 0 and distance S lies beyond the array."""
    S, (B, T) = model.cfg.span.limit, _as_batch(x).shape
    sums, counts, windows = {}, {}, {}

    def weights_of(i):
        def hook(module, args, a):  # a: the weights in the key layout, (B, H, n, chunk, chunk + P)
            band = as_band(a)  # (B, H, Tp, W), column c at distance W - 1 - c
            invalid = args[1] if len(args) > 1 else None  # padding keys, (n, 1, chunk + P)
            if invalid is None:
                valid = torch.ones(band.shape[-2:], dtype=torch.bool, device=a.device)
            else:
                valid = ~as_band(invalid.expand(a.shape[-3:])[None, None])[0, 0]
            valid[T:] = False  # rows past the block pad it to whole chunks
            sums[i], counts[i] = (band * valid).sum((0, 2)), valid.sum(0) * B

        return hook

    hooks = [(layer.attn.softmax, weights_of(i)) for i, layer in enumerate(model.layers)]
    hooks += [
        (layer.attn, lambda m, a, out, i=i: windows.__setitem__(i, out.window)) for i, layer in enumerate(model.layers)
    ]
    for layer in model.layers:  # one band per layer, whose weights the hook reads
        layer.attn.bucketed = False
    try:
        _hooked_forward(model, x, state, hooks)
    finally:
        for layer in model.layers:
            layer.attn.bucketed = True
    out = np.full((len(model.layers), model.cfg.heads, S), np.nan)
    for i, layer in enumerate(model.layers):
        s, n = sums[i].flip(-1).double(), counts[i].flip(-1).double()  # band columns in distance - shift order
        W, shift = s.shape[-1], layer.attn.shift
        weights = torch.where(n > 0, s / n.clamp(min=1), torch.nan).cpu().numpy()
        out[i, :, shift : shift + W] = weights[..., : S - shift]
        out[i, :, :shift] = 0.0  # the past window (eq. 5's range) never attends the query itself
        out[i, :, windows[i] + shift :] = 0.0  # beyond the span every weight is exactly 0
    return out


@torch.no_grad()
def dynamic_spans(model, x: torch.Tensor, state: Any = None) -> np.ndarray:
    """Dynamic span z_t at each position of ``x``, averaged over layers, heads and batch (Figure 5): (T,)."""
    if not model.layers[0].attn.span.per_query:
        raise ValueError("dynamic_spans needs a model with per-query spans (span.kind = 'dynamic')")
    zs = {}
    hooks = [(layer.attn, lambda m, a, out, i=i: zs.__setitem__(i, out.z)) for i, layer in enumerate(model.layers)]
    _hooked_forward(model, x, state, hooks)
    z = torch.stack([zs[i] for i in range(len(model.layers))])  # (L, B, T, H)
    return z.mean((0, 1, 3)).double().cpu().numpy()


def adaptive_span_arrays(model, data: np.ndarray, vocab: Any) -> dict[str, np.ndarray]:
    """``attention_by_distance`` (Figure 1): one block of ``data`` read after S tokens have filled the
    cache; with per-query spans, ``dynamic_spans`` (Figure 5): z_t at each character of the paper's
    phrase, read after the preceding S tokens of ``data``."""
    S, T = model.cfg.span.limit, model.block
    device = next(model.parameters()).device
    history = torch.as_tensor(np.asarray(data[: S + T], dtype=np.int64), device=device)[None]
    state = model.init_state(1, device)
    with torch.no_grad():
        for start in range(0, S, T):
            state = model(history[:, start : start + T], state).state
    out = {"attention_by_distance": attention_by_distance(model, history[:, S : S + T], state)}
    if model.layers[0].attn.span.per_query:
        text = torch.as_tensor(np.asarray(vocab.encode(FIG5_TEXT), dtype=np.int64), device=device)
        out["dynamic_spans"] = dynamic_spans(model, text, state)
        out["dynamic_spans_text"] = np.array(list(FIG5_TEXT))
    return out


# The probe of each model family. The Sparse Transformer's extraction still lives on its model.
PROBES: dict[str, Callable[[Any, np.ndarray, Any], dict[str, np.ndarray]]] = {
    "adaptive_span": adaptive_span_arrays,
    "sparse_transformer": lambda model, data, vocab: model.analyses(data, vocab),
    "frontier": lambda model, data, vocab: {},  # its figure reads the summaries only
}


def figure_arrays(family: str, model, data: np.ndarray, vocab: Any) -> dict[str, np.ndarray]:
    """The arrays of a trained ``model`` of ``family`` on ``data`` (the valid split), for analysis.npz."""
    return PROBES[family](model, data, vocab)
