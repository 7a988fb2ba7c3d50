"""Analytic forward FLOPs per predicted token, by the papers' definitions.

Adaptive span (Sukhbaatar et al. 2019, Table 1 / Figure 3: "FLOPS ... for a one-step prediction").
Two FLOPs per multiply-accumulate; only matrix products are counted (no softmax, masks, layer norms,
biases, embedding look-ups). Per layer and predicted token, with d_h = d / heads and span_i the
effective span of head i (min(S, z_i + R) for an adaptive head, S for a fixed one, the mean of
min(S, z_t + R) for a dynamic one):

* projections  2 * 4 d^2          (W_q, W_k, W_v, W_o; a token's key/value computed once)
* feed-forward 2 * 2 d d_ff
* attention    2 * 2 sum_i span_i d_h   (scores q.k and the weighted sum of values)
* position     2 * sum_i span_i d_h     (q.p_{t-r}, the relative position term)

plus the output layer 2 d V once per token.

The paper's own tables count differently: one FLOP per multiply-accumulate and no position term.
``per_mac=1, position=False`` (:func:`paper_table_flops`) gives 41.6M for Adaptive-Span small (S=8192,
avg span 314; the paper: 42M) and 439M for Transformer-XL 24L (d 1024, d_ff 3072, span 3800; the
paper: 438M). (The paper's 179M for the large model is below its own 209M parameters, so no count
reproduces it.) ``flops_per_token`` in run summaries uses the defaults (2 per MAC, position term on).

The implementation's own count differs in three known ways
(see tests/models/test_as_flops.py): it recomputes the key/value projections of the cached states at
every block (Transformer-XL caches hidden states), its banded score matmul covers chunk + W - 1 keys
per query instead of W, and an adaptive layer attends over one band W for all its heads (the largest
z + R rounded up to 64) where the paper counts each head's own span.
"""

from __future__ import annotations

from collections.abc import Sequence


def _spans(spans, layers: int, heads: int) -> list[list[float]]:
    if isinstance(spans, (int, float)):
        return [[float(spans)] * heads for _ in range(layers)]
    spans = [list(layer) for layer in spans]
    if len(spans) != layers or any(len(layer) != heads for layer in spans):
        raise ValueError(f"spans must be {layers} lists of {heads} per-head spans")
    return spans


def flops_breakdown(
    *,
    layers: int,
    d_model: int,
    d_ff: int,
    heads: int,
    vocab_size: int,
    spans: float | Sequence[Sequence[float]],
    per_mac: int = 2,
    position: bool = True,
) -> dict[str, float]:
    """FLOPs per predicted token by component (see the module docstring); ``total`` is their sum.

    ``spans``: one number for every head, or per layer a list of the per-head effective spans."""
    d_h = d_model / heads
    per_head = _spans(spans, layers, heads)
    span_sum = sum(sum(layer) for layer in per_head)
    k = float(per_mac)
    out = {
        "projections": k * 4 * d_model * d_model * layers,
        "feedforward": k * 2 * d_model * d_ff * layers,
        "attention": k * 2 * span_sum * d_h,
        "position": k * span_sum * d_h if position else 0.0,
        "output": k * d_model * vocab_size,
    }
    out["total"] = sum(out.values())
    return out


def flops_per_token(**kwargs) -> float:
    """Total of :func:`flops_breakdown` (same keyword arguments)."""
    return flops_breakdown(**kwargs)["total"]


def paper_table_flops(**kwargs) -> float:
    """The count behind the paper's Table 1 (1 FLOP per MAC, no position term)."""
    return flops_breakdown(per_mac=1, position=False, **kwargs)["total"]
