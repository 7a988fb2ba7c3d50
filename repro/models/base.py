"""The contract every model family meets, so the runner never needs to know which family it trains.

A family is a module under ``repro.models`` that exposes a config dataclass and a model class:

* ``Config``: a plain ``@dataclass`` with defaults. Fields use int, float, bool, str, ``Literal[...]``,
  ``Optional[...]``, ``list[...]`` or nested dataclasses; ``repro.spec`` validates manifest sections
  against it (unknown keys and wrong types become one-line errors).
* ``Model(cfg, vocab_size, block, shape)``: an ``nn.Module`` implementing :class:`LanguageModel`.
  ``vocab_size`` counts the data symbols; inputs may also contain the start token id ``vocab_size``
  (sequences of whole images/audio begin with it), so input embeddings need ``vocab_size + 1`` rows
  while the output layer predicts ``vocab_size`` symbols. ``block`` is the training context length and
  ``shape`` is the data's (rows, cols, channels) for images, else ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch


@dataclass
class ModelOutput:
    logits: torch.Tensor  # (B, T, vocab_size)
    state: Any = None  # recurrent state carried to the next block (a cache), None for stateless models
    aux_loss: torch.Tensor | None = None  # added to the NLL during training (e.g. the span L1 loss)


class LanguageModel(Protocol):
    def forward(self, x: torch.Tensor, state: Any = None) -> ModelOutput: ...

    def init_state(self, batch_size: int, device: torch.device) -> Any:
        """Empty recurrent state for ``batch_size`` streams, or ``None`` for stateless models."""

    def stats(self) -> dict[str, Any]:
        """JSON-serialisable numbers for the run summary and the logger (e.g. ``avg_span``, ``spans``)."""

    def flops_per_token(self) -> float:
        """Analytic forward FLOPs per predicted token, by the paper's definition."""


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
