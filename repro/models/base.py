"""The contract every model family meets, so the runner never needs to know which family it trains.

A family is a module under ``repro.models`` that exposes its config schema and a model class:

* ``Config``: the family's ``model`` section, a pydantic model in ``repro.config.families`` (a
  ``repro.config.fields.Section``: strict types, each bound beside its field, nested sections), so that a
  manifest is checked without torch; ``repro.config.spec`` validates manifest sections against it
  (unknown keys and wrong types become one-line errors naming the key path).
* ``Model(cfg, vocab_size, block, shape)``: a subclass of :class:`LanguageModel`. ``vocab_size``
  counts the data symbols; inputs may also contain the start token id ``vocab_size`` (sequences of
  whole images/audio begin with it), so input embeddings need ``vocab_size + 1`` rows while the output
  layer predicts ``vocab_size`` symbols. ``block`` is the training context length and ``shape`` is the
  data's (rows, cols, channels) for images, else ``None``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn


@dataclass
class ModelOutput:
    logits: torch.Tensor  # (B, T, vocab_size)
    state: Any = None  # recurrent state carried to the next block (a cache), None for stateless models
    aux_loss: torch.Tensor | None = None  # added to the NLL during training (e.g. the span L1 loss)


class LanguageModel(nn.Module, ABC):
    """An autoregressive model of ``vocab_size`` symbols trained on blocks of ``block`` tokens.

    A family implements ``forward``, ``stats`` and ``flops_per_token`` (a class lacking one cannot be
    instantiated) and sets ``vocab_size`` and ``block``; the other hooks default to what a stateless
    model needs."""

    vocab_size: int
    block: int

    @abstractmethod
    def forward(self, x: torch.Tensor, state: Any = None) -> ModelOutput:
        """Logits for the inputs ``x`` (B, T), given the recurrent ``state`` of the previous block."""

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """JSON-serialisable numbers for the run summary and the logger (e.g. ``avg_span``, ``spans``)."""

    @abstractmethod
    def flops_per_token(self) -> float:
        """Analytic forward FLOPs per predicted token, by the paper's definition."""

    def init_state(self, batch_size: int, device: torch.device) -> Any:
        """Empty recurrent state for ``batch_size`` streams, or ``None`` for stateless models."""
        return None

    def after_optimizer_step(self) -> None:
        """Called after every optimizer step (e.g. to project parameters back into their range)."""

    @torch.no_grad()
    def step(self, x: torch.Tensor, cache: Any, t: int) -> tuple[torch.Tensor, Any]:
        """Logits (B, vocab_size) for the token ``x`` (B,) at position ``t`` given the ``cache`` of the
        positions before it (``None`` at ``t = 0``), and the cache that includes ``t``. Here the cache is
        the prefix itself, run through ``forward`` again (exact, quadratic); families with a key/value
        cache override it."""
        prefix = x[:, None] if cache is None else torch.cat([cache, x[:, None]], 1)
        return self(prefix).logits[:, -1], prefix

    @torch.no_grad()
    def prefill(self, ctx: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """Logits (B, vocab_size) after the context ``ctx`` (B, P) and the cache :meth:`step` continues
        from: one forward over the context, the cache of the default ``step``. A family that overrides
        ``step`` overrides this too (:meth:`prefill_by_steps`)."""
        return self(ctx).logits[:, -1], ctx

    def prefill_by_steps(self, ctx: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """:meth:`prefill` through ``step``, one context token at a time (for a family's own cache)."""
        logits, cache = None, None
        for t in range(ctx.shape[1]):
            logits, cache = self.step(ctx[:, t], cache, t)
        return logits, cache


def map_state(state: Any, fn) -> Any:
    """``fn`` applied to every tensor of a recurrent state (lists/tuples/dicts of tensors, or None)."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, (list, tuple)):
        return type(state)(map_state(s, fn) for s in state)
    if isinstance(state, dict):
        return {k: map_state(v, fn) for k, v in state.items()}
    raise TypeError(f"cannot handle model state of type {type(state).__name__}")


def detach_state(state: Any) -> Any:
    """Cut the autograd history of a recurrent state, keeping values."""
    return map_state(state, torch.Tensor.detach)


def normal_init(model: nn.Module, std: float, layers: int, residual: list[nn.Linear]) -> None:
    """Every Linear and Embedding weight N(0, std), biases 0, then the ``residual`` projections (those
    that end a residual branch) N(0, std / sqrt(2 layers)): GPT-2's scheme, the Sparse Transformer's
    default."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, std)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)
    for w in residual:
        nn.init.normal_(w.weight, 0.0, std / math.sqrt(2 * layers))
