"""The frontier's attentions (repro.models.frontier): one file each, registered by name.

An attention is a module built as ``Attention(cfg, layer)`` (``cfg`` the ``model`` section,
:class:`repro.config.families.FrontierConfig`; ``layer`` its index) with

* ``forward(q, k, v, x) -> o``: q, k, v (B, H, T, d_h) of a causal sequence of T positions (q not yet
  scaled), x (B, T, d_model) the layer's normed input (for spans computed from it); o (B, H, T, d_h);
* ``keys_per_query(T) -> float``: the keys a query attends, averaged over the T positions and the heads
  (what the attention FLOPs count);
* ``loss`` (a tensor or None), set by ``forward``: the term it adds to the training loss (the span penalty);
* ``spans() -> (z, effective)`` per head in tokens, or None for an attention without spans.
* ``reset_parameters()`` (optional): set its own parameters to their initial values, called after the
  backbone's N(0, init_std) initialisation of every Linear and Embedding.

A new attention is a new file here whose module defines ``Attention``, registered by name in
``repro.config.families.ATTENTIONS`` (the module it is in); ``model.attention: NAME`` in a manifest selects
it, and the frontier manifest's variants are the registered attentions.
"""

from __future__ import annotations

import torch.nn as nn

from repro.config.families import ATTENTIONS, FrontierConfig


def build(cfg: FrontierConfig, layer: int) -> nn.Module:
    """The attention ``cfg.attention`` of layer ``layer``."""
    if cfg.attention not in ATTENTIONS:
        raise ValueError(f"attention {cfg.attention!r}: expected one of {', '.join(ATTENTIONS)}")
    return ATTENTIONS[cfg.attention].load().Attention(cfg, layer)
