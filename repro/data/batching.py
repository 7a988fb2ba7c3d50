"""Batches for training and evaluation: pure, deterministic, vectorised (no per-token Python).

Training:

* :class:`StreamBatches` — text in the Transformer-XL way: the token stream is cut into ``B``
  contiguous streams and batch ``i`` is block ``i`` of every stream, so a model carrying a cache sees
  each stream in order. The position is a pure function of ``i`` (resumable): later passes over the data
  wrap around to offset 0, or start at a seeded random offset (the official adaptive-span trainer's).
* :class:`SequenceBatches` — whole images/audio clips, shuffled per epoch from ``(seed, epoch)``.

Evaluation (:func:`eval_batches`) predicts every target of a split exactly once and says, with a
mask, which positions count.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from repro.data.errors import DataError


def _long(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(a, dtype=np.int64))


class StreamBatches:
    """Training batches of ``B`` contiguous streams, ``block`` tokens at a time; ``y`` is ``x`` shifted by one.

    Stream ``b`` holds tokens ``[b*L, (b+1)*L]`` with ``L = (N-1) // B`` (one token of overlap gives
    the last target). A pass over the data reads every stream from an offset ``o`` in whole blocks while
    one fits, ``(L - o) // block`` of them. ``passes="wrap"``: every pass starts at ``o = 0`` and a model's
    cache carries over the wrap. ``"random_offset"`` (the official adaptive-span trainer): pass ``p >= 1``
    starts every stream at ``o = default_rng((seed, p)).integers(block)`` and :meth:`starts_pass` tells
    the trainer to reset the cache there. Pass 0 starts at 0 either way.
    """

    def __init__(self, tokens: np.ndarray, batch_size: int, block: int, passes: str = "wrap", seed: int = 0):
        if tokens.ndim != 1:
            raise DataError(f"StreamBatches needs a 1-D token stream, got shape {tokens.shape}")
        if passes not in ("wrap", "random_offset"):
            raise DataError(f"passes must be wrap or random_offset, got {passes!r}")
        self.tokens, self.batch_size, self.block = tokens, batch_size, block
        self.passes, self.seed = passes, seed
        self.stream_len = (len(tokens) - 1) // batch_size
        self.blocks = self.stream_len // block
        if self.blocks < 1:
            raise DataError(f"{len(tokens):,} tokens are too few for {batch_size} streams of one {block}-token block")
        self._offsets = np.arange(batch_size)[:, None] * self.stream_len + np.arange(block + 1)[None, :]
        self._starts = [0]  # random_offset: the first batch of each pass, extended on demand

    def __len__(self) -> int:
        return self.blocks

    def offset(self, p: int) -> int:
        """Where pass ``p`` starts in every stream."""
        if p == 0 or self.passes == "wrap":
            return 0
        return int(np.random.default_rng((self.seed, p)).integers(self.block))

    def locate(self, i: int) -> tuple[int, int]:
        """(pass, block within the pass) of batch ``i``."""
        if self.passes == "wrap":
            return divmod(i, self.blocks)
        while self._starts[-1] <= i:
            p = len(self._starts) - 1
            self._starts.append(self._starts[-1] + (self.stream_len - self.offset(p)) // self.block)
        p = bisect.bisect_right(self._starts, i) - 1
        return p, i - self._starts[p]

    def starts_pass(self, i: int) -> bool:
        """True where batch ``i`` begins a pass whose streams do not continue the previous batch's."""
        return self.passes == "random_offset" and i > 0 and self.locate(i)[1] == 0

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        p, k = self.locate(i)
        chunk = self.tokens[self._offsets + self.offset(p) + k * self.block]
        return _long(chunk[:, :-1]), _long(chunk[:, 1:])


class SequenceBatches:
    """Training batches of whole sequences; ``y`` is the sequences, ``x`` is ``[start_token, y[:, :-1]]``.

    Epoch ``e`` visits the sequences in the order ``default_rng((seed, e)).permutation(N)``; the last
    incomplete batch of an epoch is dropped. ``i`` wraps around into later epochs.
    """

    def __init__(self, seqs: np.ndarray, batch_size: int, seed: int, start_token: int):
        if seqs.ndim != 2:
            raise DataError(f"SequenceBatches needs (N, L) sequences, got shape {seqs.shape}")
        if len(seqs) < batch_size:
            raise DataError(f"{len(seqs)} sequences are too few for a batch of {batch_size}")
        self.seqs, self.batch_size, self.seed, self.start_token = seqs, batch_size, seed, start_token
        self._epoch, self._order = -1, np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.seqs) // self.batch_size

    def order(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:
            self._epoch, self._order = epoch, np.random.default_rng((self.seed, epoch)).permutation(len(self.seqs))
        return self._order

    def starts_pass(self, i: int) -> bool:
        """Whole sequences carry no state from batch to batch: never a pass to reset for."""
        return False

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, j = divmod(i, len(self))
        idx = self.order(epoch)[j * self.batch_size : (j + 1) * self.batch_size]
        y = _long(self.seqs[np.sort(idx)])  # sorted: contiguous reads from the memory map
        return shift_right(y, self.start_token), y


def shift_right(y: torch.Tensor, start_token: int) -> torch.Tensor:
    """``[start_token, y[:, :-1]]``: the inputs that predict every element of ``y``."""
    return torch.cat([torch.full_like(y[:, :1], start_token), y[:, :-1]], dim=1)


@dataclass
class EvalBatch:
    """Inputs ``x``, targets ``y`` (both (B, T) long) and ``mask`` (bool): which targets are scored.

    Text only: ``targets`` (B, T), the index of each target in the split, and ``view`` (B, 1), the first
    token of the split that row's model has in view (its stream's start, or its window's): a target whose
    source lies before it cannot be predicted from it (:func:`in_view`)."""

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    targets: np.ndarray | None = None
    view: np.ndarray | None = None


def in_view(batch: EvalBatch, distance: np.ndarray) -> np.ndarray:
    """Which targets of ``batch`` have their source in view: ``distance`` (per token of the split, 0 = no
    source) back from the target lands at or after the row's ``view``. Targets without a source count
    as in view (nothing is missing)."""
    targets = np.minimum(batch.targets, len(distance) - 1)
    back = distance[targets]
    return (back == 0) | (targets - back >= batch.view)


def eval_batches(
    data: np.ndarray, batch_size: int, block: int, *, min_context: int, stateful: bool, start_token: int
) -> Iterator[EvalBatch]:
    """Batches that predict every target of a split exactly once.

    * Text (1-D, targets are tokens 1..N-1), ``stateful=True``: ``B`` contiguous streams covering the
      split, consecutive blocks in order so the model's cache carries across batches; the ragged end
      is padded with ``mask=False``. ``min_context`` is unused (the cache provides the context).
    * Text, ``stateful=False``: windows of ``block`` tokens with stride ``block - min_context``. Each
      window after the first scores only its targets at positions ``t >= min_context``, i.e. those
      that see at least ``min_context`` earlier tokens of the window besides their input; the first
      window scores all of its targets. Needs ``0 <= min_context < block``.
    * Sequences (2-D, (N, L)): whole sequences in order, ``x`` starting with ``start_token``, every
      position scored; ``block`` must equal ``L``.
    """
    if data.ndim == 2:
        yield from _sequence_batches(data, batch_size, block, start_token)
    elif data.ndim != 1 or len(data) < 2:
        raise DataError(f"evaluation needs a token stream of >= 2 tokens or (N, L) sequences, got {data.shape}")
    elif stateful:
        yield from _stream_batches(data, batch_size, block)
    else:
        yield from _window_batches(data, batch_size, block, min_context)


def _gather(data: np.ndarray, positions: np.ndarray, scored: np.ndarray, view: np.ndarray) -> EvalBatch:
    """x = data[positions], y = data[positions + 1] (zero past the last target); ``scored`` is the mask,
    ``view`` each row's first position in view.

    Unscored positions inside the data keep their real tokens: they are the context of scored ones.
    """
    inside = positions < len(data) - 1
    pos = np.where(inside, positions, 0)
    x = np.where(inside, data[pos], 0)
    y = np.where(inside, data[pos + 1], 0)
    return EvalBatch(_long(x), _long(y), torch.from_numpy(scored & inside), positions + 1, view)


def _stream_batches(data: np.ndarray, batch_size: int, block: int) -> Iterator[EvalBatch]:
    targets = len(data) - 1
    stream_len = -(-targets // batch_size)
    starts = np.arange(batch_size)[:, None] * stream_len
    ends = np.minimum(starts + stream_len, targets)
    for k in range(-(-stream_len // block)):
        positions = starts + k * block + np.arange(block)[None, :]
        yield _gather(data, positions, positions < ends, starts)


def _window_batches(data: np.ndarray, batch_size: int, block: int, min_context: int) -> Iterator[EvalBatch]:
    if not 0 <= min_context < block:
        raise DataError(f"min_context must be in [0, block={block}), got {min_context}")
    targets, stride = len(data) - 1, block - min_context
    windows = 1 if targets <= block else 1 + -(-(targets - block) // stride)
    t = np.arange(block)[None, :]
    for first in range(0, windows, batch_size):
        w = np.arange(first, min(first + batch_size, windows))[:, None]
        positions = w * stride + t
        valid = (positions < targets) & ((t >= min_context) | (w == 0))
        yield _gather(data, positions, valid, w * stride)


def _sequence_batches(data: np.ndarray, batch_size: int, block: int, start_token: int) -> Iterator[EvalBatch]:
    if block != data.shape[1]:
        raise DataError(
            f"block ({block}) must equal the sequence length ({data.shape[1]}) for whole-sequence evaluation"
        )
    for first in range(0, len(data), batch_size):
        y = _long(data[first : first + batch_size])
        yield EvalBatch(shift_right(y, start_token), y, torch.ones_like(y, dtype=torch.bool))
