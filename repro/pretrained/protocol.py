"""The official evaluation protocol: the official ``trainer.full_eval``, as ``--full-eval-mode --batch-sz 8``
runs it, on the suite's model.

The split's token stream is cut into ``batch`` contiguous streams (``data._batchify``: the tokens beyond a
multiple of ``batch`` dropped), read block after block with the cache carried across blocks from a zero
start; each block's loss is the mean NLL of its ``batch x block`` targets, and the split's loss the mean of
the blocks' losses, in nats (bits: / ln 2). The loop stops after the block at which the position reaches
the last ``block`` tokens of a stream, so every block is whole and each stream's tail (up to 2 blocks) is
not scored. The suite's own protocol (:mod:`repro.train.evaluation`) scores every target once instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from repro.errors import UserError
from repro.models.base import LanguageModel

BATCH = 8  # the official scripts' --batch-sz in --full-eval-mode


def batchify(stream: np.ndarray, batch: int) -> torch.Tensor:
    """``data._batchify``: (batch, len // batch), stream i the i-th contiguous part."""
    n = len(stream) // batch
    return torch.as_tensor(np.asarray(stream[: n * batch], dtype=np.int64)).view(batch, n)


def block_starts(length: int, block: int) -> list[int]:
    """Where the blocks ``full_eval`` scores start in a stream of ``length`` tokens."""
    starts, pos = [], 0
    for _ in range(math.ceil(length / block)):
        starts.append(pos)
        pos += block
        if pos >= length - block:
            break
    return starts


@torch.no_grad()
def official_bits(
    model: LanguageModel,
    stream: np.ndarray,
    block: int,
    batch: int = BATCH,
    device: torch.device | str = "cpu",
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Bits of ``model`` over a split's official token ``stream`` by the official protocol: ``bits``, the
    ``targets`` scored and the ``blocks``; ``progress`` is told the targets of each block."""
    data = batchify(stream, batch).to(device)
    length = data.size(1)
    if length < block + 1:
        raise UserError(
            f"the split's {len(stream):,} tokens make {batch} streams of {length:,}; the official protocol needs "
            f"more than one block of {block}"
        )
    model.eval()
    state, losses = model.init_state(batch, device), []
    for pos in block_starts(length, block):
        x, y = data[:, pos : pos + block], data[:, pos + 1 : pos + block + 1]
        out = model(x, state)
        state = out.state
        losses.append(F.cross_entropy(out.logits.float().flatten(0, 1), y.flatten()).item())
        if progress is not None:
            progress(y.numel())
    return {
        "bits": sum(losses) / len(losses) / math.log(2),
        "targets": len(losses) * batch * block,
        "blocks": len(losses),
    }
