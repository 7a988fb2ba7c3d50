"""How a kernel computes one part of a pattern: the part's predicate read in its layout's coordinates.

For a part of :data:`repro.models.patterns.PARTS`, a geometry (stride l, summary width c, the summary
rank of each head) and the number of blocks nb, :func:`plan` evaluates the part's predicate on index
arrays and says what the kernels must compute (by shift invariance one block stands for all):

* ``causal``: the whole causal triangle (kind ``causal``);
* ``own`` / ``previous``: query offset r against key offset s of the query's own / the previous block,
  an in-tile mask (heads or 1, l, l): kind ``causal`` (s <= r), ``full``, ``empty`` or ``masked``;
* ``residue``: query a*l + r against keys b*l + r; kind ``shift`` with ``shift`` = k when the part allows
  exactly b <= a - k (causal attention over the residue class, queries shifted k places), else ``empty``;
* ``earlier``: the key offsets within a block (heads, c') that every query attends to in every earlier
  block, gathered by the kernels into a short key sequence (kind ``full``).

:func:`window` plans a pattern's ``own`` and ``previous`` parts together: query tiles of h rows (a
divisor of l) against the l + h keys that end with the tile (layout ``window``, kind ``masked``).

A part that does not fit its layout this way is refused (``ValueError``): the kernels never guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from repro.models import patterns as P


@dataclass(frozen=True, eq=False)
class Plan:
    layout: str
    kind: str  # causal | full | masked | empty | shift
    mask: np.ndarray | None = None  # own/previous, kind masked: (heads or 1, l, l) bool; window: (1, h, l + h)
    shift: int = 0  # residue: keys at least this many strides back
    offsets: np.ndarray | None = None  # earlier: (heads, c') gathered key offsets within a block

    @property
    def empty_rows(self) -> np.ndarray | None:
        """(heads or 1, l) rows of a masked tile without any key."""
        return None if self.mask is None else ~self.mask.any(-1)


def plan(part: P.Part, pattern: str, stride: int | None, c: int | None, ranks: tuple[int, ...], nb: int) -> Plan:
    """The plan of ``part`` (of ``pattern``) for heads with summary ``ranks`` over ``nb`` blocks."""
    return _plan(part, pattern, stride, c, tuple(ranks), nb)


@lru_cache(maxsize=256)
def _plan(part, pattern, l, c, ranks, nb) -> Plan:
    g = P.geometry(pattern, l, c, ranks)
    H = len(ranks)

    def ev(i, j):  # the part's mask at positions i, j (broadcasting), with a leading axis of heads
        return np.broadcast_to(part.mask(i[None], j[None], g), (H, *np.broadcast_shapes(i.shape, j.shape)))

    if part.layout == "causal":
        w = np.arange(4 * (l or 4))
        if not (ev(w[:, None], w[None, :]) == (w[None, :] <= w[:, None])).all():
            raise ValueError(f"part {part} of {pattern!r} is not causal attention")
        return Plan("causal", "causal")
    r = np.arange(l)
    if part.layout in ("own", "previous"):
        tile = ev(l + r[:, None], (l if part.layout == "own" else 0) + r[None, :])
        tile = tile[:1] if (tile == tile[:1]).all() else tile
        if not tile.any():
            return Plan(part.layout, "empty")
        if tile.all():
            return Plan(part.layout, "full")
        if (tile == (r[None, :] <= r[:, None])).all():
            return Plan(part.layout, "causal")
        return Plan(part.layout, "masked", mask=np.ascontiguousarray(tile))
    b = np.arange(nb)
    if part.layout == "residue":  # rows a = nb - 1 and a = 0 of every residue class hold every distance
        last = ev(((nb - 1) * l + r)[:, None], b[None, :] * l + r[:, None])  # (H, l, nb)
        first = ev(r[:, None], b[None, :] * l + r[:, None])
        k = nb - last.sum(-1)
        if (k != k.flat[0]).any():
            raise ValueError(f"part {part} of {pattern!r} shifts differently across residues or heads")
        k = int(k.flat[0])
        if first[..., 1:].any() or not (last == (b <= nb - 1 - k)).all():
            raise ValueError(f"part {part} of {pattern!r} is not causal attention within residue classes")
        return Plan("residue", "empty") if k >= nb else Plan("residue", "shift", shift=k)
    if part.layout == "earlier":
        tile = ev(l + r[:, None], r[None, :])  # query block 1 against block 0
        cols = tile.any(1)  # (H, l)
        counts = cols.sum(1)
        if len(set(counts.tolist())) != 1:
            raise ValueError(f"part {part} of {pattern!r} gathers a different number of keys per head")
        if counts[0] == 0:
            return Plan("earlier", "empty")
        for d0 in range(1, nb, 16):  # every earlier block: the gathered columns, all of them, for every row
            d = np.arange(d0, min(nb, d0 + 16))
            m = ev((d[:, None] * l + r[None, :]).reshape(-1, 1), r[None, :]).reshape(H, len(d), l, l)
            if not (m == cols[:, None, None, :]).all():
                raise ValueError(f"part {part} of {pattern!r} is not the same columns of every earlier block")
        return Plan("earlier", "full", offsets=np.stack([np.nonzero(cc)[0] for cc in cols]))
    raise ValueError(f"unknown layout {part.layout!r}")


def window(
    parts: tuple[P.Part, ...], pattern: str, stride: int, c: int | None, ranks: tuple[int, ...], split: int = 2
) -> Plan | None:
    """The ``own`` and ``previous`` ``parts`` of ``pattern`` as one mask (1, h, l + h) that every
    query tile of h = l/split rows applies to the l + h keys ending with the tile; None where split does
    not divide l, a block's tiles differ, or some key of the parts lies outside the window."""
    return _window(tuple(parts), pattern, stride, c, tuple(ranks), split)


@lru_cache(maxsize=64)
def _window(parts, pattern, l, c, ranks, split) -> Plan | None:
    if l % split or split < 2:
        return None
    h, j = l // split, np.arange(3 * l)  # keys of blocks 0..2; the tiles are block 2's parts
    g = P.geometry(pattern, l, c, ranks)
    tiles = []
    for start in range(2 * l, 3 * l, h):
        i = start + np.arange(h)
        m = np.broadcast_to(P.union_of(parts, i[None, :, None], j[None, None, :], g), (len(ranks), h, 3 * l))
        inside = (j >= start - l) & (j < start + h)
        if m[..., ~inside].any():
            return None
        tiles.append(m[..., inside])
    # one mask for every head: a head-dependent part (the summary's offset) moves with the tile, so its
    # two tiles never agree and it has no window; a plan of per-head windows would never be used
    if any((t != tiles[0]).any() for t in tiles[1:]) or not (tiles[0] == tiles[0][:1]).all():
        return None
    return Plan("window", "masked", mask=np.ascontiguousarray(tiles[0][:1]))
