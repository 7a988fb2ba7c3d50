"""Bits over a whole split, with a stated minimum context per predicted token.

* Stateful models (a Transformer-XL cache, the adaptive-span family) read the split as B contiguous
  streams, block after block, carrying their cache: every target sees the cache (up to the span limit)
  plus the block so far, exactly as in training and as in the adaptive-span paper's evaluation.
* Stateless models (the sparse/dense Transformer) read overlapping windows of ``block`` tokens that
  advance by ``block - min_context``; a window scores only targets with at least ``min_context`` tokens
  of context inside it (the first window scores all of its targets). The Sparse Transformer paper's
  Table 3 is this procedure at several ``min_context`` values.
* Images and audio: whole sequences, every element scored.

Every target of the split is scored exactly once; bits = total NLL in nats / targets / ln 2.

A synthetic corpus (:mod:`repro.data.synthetic`) also knows each target's source: its targets are scored
per dependency class as well, and a target whose source lies before what its stream or window holds is
counted apart (class ``unseen``), never in its class: with many short streams (``eval.batch_size``) the
first D targets of every stream cannot see a source D back, and would read as a model blind at D. The
split's bits over every target are unchanged.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from repro.config.spec import RunSpec
from repro.data.batching import eval_batches, in_view
from repro.data.synthetic import Truth
from repro.models.base import LanguageModel
from repro.progress import Lines


def min_context(spec: RunSpec, stateful: bool) -> int | None:
    """The minimum context of the stateless window procedure (None for stateful models)."""
    if stateful:
        return None
    return spec.eval.min_context if spec.eval.min_context is not None else spec.data.block // 2


@torch.no_grad()
def evaluate(
    model: LanguageModel,
    data: np.ndarray,
    spec: RunSpec,
    device: torch.device,
    vocab_size: int,
    max_targets: int | None = None,
    progress: str | None = None,
    truth: Truth | None = None,
) -> dict[str, Any]:
    """Bits of ``model`` over ``data``; ``max_targets``: stop after the batch that reaches that many scored
    targets (a prefix of the split in the procedure's order: the quick validation's, and a ``--max-steps``
    run's final evaluation); ``progress``: the split's name, for a bar on a terminal and lines off one (a
    log), as training shows; ``truth``: the split's dependencies (a synthetic corpus), which adds
    ``groups``, bits and targets per dependency class (:func:`by_group`)."""
    model.eval()
    stateful = model.init_state(1, device) is not None
    context = min_context(spec, stateful)
    batches = eval_batches(
        data, spec.eval.batch_size, spec.data.block, min_context=context or 0, stateful=stateful, start_token=vocab_size
    )
    total, count, state = 0.0, 0, None
    groups = None if truth is None else np.zeros((2, len(truth.groups) + 1))  # nats, targets; last: unseen
    bar = _progress(progress, data, max_targets)
    for batch in batches:
        x, y, mask = batch.x.to(device), batch.y.to(device), batch.mask.to(device)
        if stateful and state is None:
            state = model.init_state(x.size(0), device)
        out = model(x, state)
        state = out.state
        nll = F.cross_entropy(out.logits.float().flatten(0, 1), y.flatten(), reduction="none")
        total += float(nll[mask.flatten()].sum())
        if groups is not None:
            _add_groups(groups, nll.view(mask.shape), batch, truth)
        scored = int(mask.sum())
        count += scored
        if bar is not None:
            bar.update(scored)
        if max_targets is not None and count >= max_targets:
            break
    if bar is not None:
        bar.close()
    return {
        "bits": total / max(count, 1) / math.log(2.0),
        "targets": count,
        "procedure": "stream" if stateful else ("sequences" if data.ndim == 2 else "windows"),
        "min_context": context,
        **({} if groups is None else {"groups": by_group(groups, truth)}),
    }


def _add_groups(groups: np.ndarray, nll: torch.Tensor, batch, truth: Truth) -> None:
    """Add a batch's scored targets to ``groups`` (nats and counts per class, the last column the targets
    whose source is out of view)."""
    mask = batch.mask.numpy()
    targets = np.minimum(batch.targets, len(truth.group) - 1)[mask]
    index = np.where(in_view(batch, truth.distance)[mask], truth.group[targets], len(truth.groups))
    groups[0] += np.bincount(index, weights=nll.float().cpu().numpy()[mask], minlength=groups.shape[1])
    groups[1] += np.bincount(index, minlength=groups.shape[1])


def by_group(groups: np.ndarray, truth: Truth) -> dict[str, dict[str, float | int | None]]:
    """Per dependency class (and ``unseen``): bits over its targets (None without any) and their count."""
    names = [g.name for g in truth.groups] + ["unseen"]
    return {
        name: {
            "bits": float(nats / n / math.log(2.0)) if n else None,
            "targets": int(n),
        }
        for name, nats, n in zip(names, groups[0], groups[1], strict=True)
    }


def unigram_bits(train: np.ndarray, data: np.ndarray, vocab_size: int) -> float:
    """Bits per symbol of ``data`` under the training split's unigram distribution (add-one smoothed):
    the level a model reaches by learning symbol frequencies alone (claims' "it learned the data")."""
    counts = np.bincount(np.asarray(train).ravel(), minlength=vocab_size)[:vocab_size] + 1.0
    log_p = np.log2(counts / counts.sum())
    return float(-log_p[np.asarray(data).ravel()].mean())


def _progress(split: str | None, data: np.ndarray, max_targets: int | None = None):
    if split is None:
        return None
    total = int(data.size - (1 if data.ndim == 1 else 0))
    total = total if max_targets is None else min(total, max_targets)
    if not sys.stderr.isatty():
        return Lines(f"evaluating {split}", total, "targets")
    return tqdm(total=total, unit="tok", unit_scale=True, desc=f"evaluating {split}", file=sys.stderr, leave=False)
