"""Autoregressive sampling with cached keys and values.

``sample(model, vocab_size, n_samples, length)`` draws ``length`` symbols per sample through the
model's ``step(x, cache, t) -> (logits, cache)`` (:class:`repro.models.base.LanguageModel`: the Sparse
Transformer family caches keys and values, the default re-runs the forward on the prefix), feeding the
start token ``vocab_size`` first (sequences of whole images/audio begin with it) or a ``prompt``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile
import torch
from matplotlib.figure import Figure

from repro.data.audio import RATE, mu_law_decode
from repro.files import atomic
from repro.models.base import LanguageModel


def _draw(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """A symbol per row from softmax(logits / temperature); greedy at 0. The logits are shifted to a
    maximum of 0 and divided in float64, so that any positive temperature draws (one near 0, as 1e-300,
    only the most likely symbol) rather than dividing into inf - inf = NaN."""
    if temperature == 0:
        return logits.argmax(-1)
    shifted = logits.double() - logits.double().amax(-1, keepdim=True)
    probs = torch.softmax(shifted / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def _rows(prompt: torch.Tensor | None, n_samples: int, device: torch.device | None = None) -> torch.Tensor | None:
    """The prompt as (n_samples, P) symbols: a (P,) prompt is shared by every sample."""
    if prompt is None:
        return None
    prompt = torch.as_tensor(prompt, dtype=torch.long, device=device)
    return prompt[None].expand(n_samples, -1) if prompt.dim() == 1 else prompt


@torch.no_grad()
def sample(
    model: LanguageModel,
    vocab_size: int,
    n_samples: int,
    length: int,
    *,
    temperature: float = 1.0,
    prompt: torch.Tensor | None = None,
    start_token: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.LongTensor:
    """Returns (n_samples, length) generated symbols (the prompt, if any, not included).

    ``prompt`` (P,) or (n_samples, P) is fed after the start token when ``start_token`` is given
    (default: the start token ``vocab_size`` is used only when there is no prompt). The context
    (start token + prompt + generated) must fit the model's training block. ``temperature=0`` is
    greedy decoding.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    prompt = _rows(prompt, n_samples, device)
    if start_token is None and prompt is None:
        start_token = vocab_size
    parts = []
    if start_token is not None:
        parts.append(torch.full((n_samples, 1), start_token, dtype=torch.long, device=device))
    if prompt is not None:
        parts.append(prompt)
    ctx = torch.cat(parts, dim=1)
    if ctx.shape[1] + length - 1 > model.block:
        raise ValueError(f"context {ctx.shape[1]} + length {length} exceeds the model's block of {model.block}")
    out = torch.empty(n_samples, length, dtype=torch.long, device=device)
    try:
        logits, cache = model.prefill(ctx)
        for s in range(length):
            out[:, s] = _draw(logits, temperature, generator)
            if s + 1 < length:
                logits, cache = model.step(out[:, s], cache, ctx.shape[1] + s)
    finally:
        model.train(was_training)
    return out


def sample_long(
    model: LanguageModel,
    vocab_size: int,
    n_samples: int,
    length: int,
    *,
    temperature: float = 1.0,
    prompt: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.LongTensor:
    """(n_samples, length) symbols after ``prompt`` (or the start token), for any ``length``: within one
    block as :func:`sample`; beyond it, the context window slides: when it is full, the last half block
    of symbols becomes the new context (prefilled) and sampling goes on from there."""
    keep = max(1, model.block // 2)
    context = _rows(prompt, n_samples)
    if context is not None and context.shape[1] > model.block:
        raise ValueError(f"the prompt's {context.shape[1]} symbols exceed the model's block of {model.block}")
    chunks, produced = [], 0
    while produced < length:
        room = model.block - (context.shape[1] if context is not None else 1) + 1
        chunk = sample(
            model,
            vocab_size,
            n_samples,
            min(room, length - produced),
            temperature=temperature,
            prompt=context,
            generator=generator,
        )
        chunks.append(chunk)
        produced += chunk.shape[1]
        history = chunk if context is None else torch.cat([context, chunk], dim=1)
        context = history[:, -keep:]
    return torch.cat(chunks, dim=1) if chunks else torch.empty(n_samples, 0, dtype=torch.long)


def write_samples(samples: torch.Tensor, vocab, info, out_dir, stem: str = "samples") -> list:
    """Save samples as a text file, an image grid (PNG) or mu-law audio (WAV), each written atomically
    (:mod:`repro.files.atomic`); returns the paths."""
    out_dir = Path(out_dir)
    atomic.refuse_link(out_dir)
    atomic.make_dirs(out_dir)
    arr = samples.cpu().numpy()
    if info.kind == "text":
        path = out_dir / f"{stem}.txt"
        atomic.write_text(path, "\n\n----\n\n".join(vocab.decode(row) for row in arr) + "\n")
        return [path]
    if info.kind == "image":
        rows, cols, ch = info.shape
        n = len(arr)
        grid = int(np.ceil(np.sqrt(n)))
        fig = Figure(figsize=(grid * 1.5, grid * 1.5))  # no pyplot: no backend, nothing to close
        axes = fig.subplots(grid, grid, squeeze=False)
        for ax in axes.flat:
            ax.axis("off")
        for ax, row in zip(axes.flat, arr):
            img = row[: rows * cols * ch].reshape(rows, cols, ch).astype(np.uint8)
            ax.imshow(img[..., 0] if ch == 1 else img, cmap="gray" if ch == 1 else None, vmin=0, vmax=255)
        path = out_dir / f"{stem}.png"
        with atomic.replacing(path) as fh:
            fig.savefig(fh, format="png", dpi=100)
        return [path]
    paths = []
    for i, row in enumerate(arr):
        path = out_dir / f"{stem}-{i}.wav"
        with atomic.replacing(path) as fh:
            soundfile.write(fh, mu_law_decode(row.astype(np.uint8)), RATE, format="WAV")
        paths.append(path)
    return paths
