"""Synthetic corpora with known long-range structure: mechanism probes whose right answer is known.

Not the papers' data: each generator writes a token stream together with its *truth*, for every token
the distance back to the one token it depends on (0: none) and its dependency class, so that evaluation
can report bits per class beside two known levels (docs/probes.md):

* ``floor``: the bits of the generating process given the source, the best any model can do;
* ``blind``: the bits of the best prediction that knows the class but not its source, what a model blind
  at the source's distance gets.

Generators (``data.synthetic.generator``), each seeded by ``data.synthetic.seed``:

* ``periodic``: token t equals token t - D with probability ``keep``, else uniform over ``symbols``
  (class ``long``; the first D tokens, class ``start``, are uniform);
* ``mix``: the same, each stretch of ``stretch`` tokens with its own distance drawn from ``distances``
  (classes ``d<distance>``);
* ``grid``: images of ``rows`` x ``width`` pixels over ``symbols`` levels, each opened by a marker token
  (class ``marker``); the first row is uniform (``row0``), every pixel below it equals the pixel above
  with probability ``keep`` (``above``, distance ``width``);
* ``copy``: records of ``record`` tokens: a fresh segment of ``segment`` symbols opens each record
  (``fresh``), and at a random offset the segment of the record ``back`` records earlier is copied, each
  symbol kept with probability ``keep`` (``copy``: distance ``back * record`` plus the offset, so only
  attention by content finds it); the rest is filler (``filler``). Segments and filler use the lower
  and upper halves of the symbols.

The corpus is split 90/5/5 as every text corpus (:func:`repro.data.on_disk.split_bounds`).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass

import numpy as np

from repro.data.errors import DataError
from repro.data.on_disk import SPLITS, split_bounds
from repro.data.vocab import Vocab

GENERATORS = ("periodic", "mix", "grid", "copy")


@dataclass(frozen=True)
class Group:
    """A dependency class: its name and its two known levels in bits per token."""

    name: str
    floor: float
    blind: float


@dataclass(frozen=True)
class Truth:
    """Per token of a split: ``distance`` back to its source (0: none) and ``group``, an index into
    ``groups``."""

    distance: np.ndarray
    group: np.ndarray
    groups: tuple[Group, ...]


@dataclass(frozen=True)
class Corpus:
    tokens: np.ndarray
    distance: np.ndarray
    group: np.ndarray
    groups: tuple[Group, ...]
    vocab: Vocab


def noisy_copy_bits(keep: float, symbols: int) -> float:
    """Entropy in bits of a symbol that equals a known one with probability ``keep``, else is uniform over
    ``symbols`` (which may draw the known one again)."""
    same = keep + (1 - keep) / symbols
    other = (1 - keep) / symbols
    return -sum(p * math.log2(p) * n for p, n in ((same, 1), (other, symbols - 1)) if p > 0)


def _copy_in_chunks(x: np.ndarray, distance: np.ndarray, copy: np.ndarray, step: int) -> None:
    """x[t] = x[t - distance[t]] where ``copy``, in order: chunks of ``step`` (the smallest distance) only
    read tokens already final."""
    for start in range(0, len(x), step):
        t = np.arange(start, min(start + step, len(x)))
        take = t[copy[t]]
        x[take] = x[take - distance[take]]


def _periodic(o: dict, rng: np.random.Generator) -> Corpus:
    n, v, d = o["tokens"], o["symbols"], o["distance"]
    return _distances(n, v, o["keep"], np.full(n, d), {d: "long"}, rng)


def _mix(o: dict, rng: np.random.Generator) -> Corpus:
    n, v, stretch = o["tokens"], o["symbols"], o["stretch"]
    choice = np.asarray(o["distances"])[rng.integers(len(o["distances"]), size=-(-n // stretch))]
    names = {d: f"d{d}" for d in o["distances"]}
    return _distances(n, v, o["keep"], np.repeat(choice, stretch)[:n], names, rng)


def _distances(n: int, v: int, keep: float, dist: np.ndarray, names: dict, rng: np.random.Generator) -> Corpus:
    """A stream where token t copies token t - dist[t] with probability ``keep`` (tokens with no source
    are uniform, class ``start``)."""
    x = rng.integers(v, size=n)
    copy = rng.random(n) < keep
    has = np.arange(n) >= dist
    _copy_in_chunks(x, dist, copy & has, int(dist.min()))
    order = sorted(names)
    groups = (
        Group("start", math.log2(v), math.log2(v)),
        *(Group(names[d], noisy_copy_bits(keep, v), math.log2(v)) for d in order),
    )
    group = np.where(has, 1 + np.searchsorted(order, dist), 0)
    return Corpus(x, np.where(has, dist, 0), group, groups, Vocab(v, "symbol"))


def _grid(o: dict, rng: np.random.Generator) -> Corpus:
    levels, rows, width, keep = o["symbols"], o["rows"], o["width"], o["keep"]
    images = o["tokens"] // (rows * width + 1)
    if images < 20:
        raise DataError(f"data.synthetic.tokens: {o['tokens']} make {images} images; allowed: at least 20")
    pix = rng.integers(levels, size=(images, rows, width))
    copy = rng.random((images, rows, width)) < keep
    for r in range(1, rows):
        pix[:, r] = np.where(copy[:, r], pix[:, r - 1], pix[:, r])
    marker = np.full((images, 1), levels)
    tokens = np.concatenate([marker, pix.reshape(images, -1)], axis=1).ravel()
    kind = np.concatenate([[0], np.full(width, 1), np.full((rows - 1) * width, 2)])  # marker, row0, above
    group = np.tile(kind, images)
    distance = np.tile(np.where(kind == 2, width, 0), images)
    distance[group == 0] = rows * width + 1  # the marker recurs: the previous image's
    distance[0] = 0
    groups = (
        Group("marker", 0.0, 0.0),
        Group("row0", math.log2(levels), math.log2(levels)),
        Group("above", noisy_copy_bits(keep, levels), math.log2(levels)),
    )
    return Corpus(tokens, distance, group, groups, Vocab(levels + 1, "symbol"))


def _copy(o: dict, rng: np.random.Generator) -> Corpus:
    v, record, segment, back, keep = o["symbols"], o["record"], o["segment"], o["back"], o["keep"]
    half, records = v // 2, o["tokens"] // record
    if records <= back + 20:
        raise DataError(f"data.synthetic.tokens: {o['tokens']} make {records} records; allowed: > back + 20")
    x = half + rng.integers(v - half, size=(records, record))  # filler
    group = np.full((records, record), 1)  # filler
    distance = np.zeros((records, record), dtype=np.int64)
    x[:, :segment] = rng.integers(half, size=(records, segment))
    group[:, :segment] = 0  # fresh
    at = rng.integers(segment, record - segment + 1, size=records)
    i = np.arange(back, records)[:, None]
    cols = at[back:, None] + np.arange(segment)[None, :]
    noisy = rng.random((len(i), segment)) >= keep
    x[i, cols] = np.where(noisy, rng.integers(half, size=(len(i), segment)), x[i - back, np.arange(segment)])
    group[i, cols] = 2
    distance[i, cols] = back * record + at[back:, None]
    groups = (
        Group("fresh", math.log2(half), math.log2(half)),
        Group("filler", math.log2(v - half), math.log2(v - half)),
        Group("copy", noisy_copy_bits(keep, half), math.log2(half)),
    )
    return Corpus(x.ravel(), distance.ravel(), group.ravel(), groups, Vocab(v, "symbol"))


_MAKE = {"periodic": _periodic, "mix": _mix, "grid": _grid, "copy": _copy}


def nothing_stored(job=None) -> dict:
    """What preparing or verifying a synthetic corpus does: refuse, saying why (a DataError)."""
    raise DataError(
        "dataset 'synthetic' is generated from its data.synthetic section when a run opens it; "
        "nothing is prepared or stored"
    )


def parse(options: str) -> dict:
    """The generator's options from ``data.synthetic`` as the spec passes them (canonical JSON)."""
    try:
        o = json.loads(options)
    except (TypeError, ValueError):
        raise DataError(f"data.synthetic: not generator options: {str(options)[:60]!r}") from None
    if not isinstance(o, dict) or o.get("generator") not in GENERATORS:
        raise DataError(f"data.synthetic.generator: allowed: one of {', '.join(GENERATORS)}")
    return o


@functools.lru_cache(maxsize=4)
def generate(options: str) -> Corpus:
    """The corpus ``options`` (canonical JSON of ``data.synthetic``) describe; the same options give the
    same corpus on any machine (numpy's PCG64 from the seed)."""
    o = parse(options)
    corpus = _MAKE[o["generator"]](o, np.random.default_rng(o["seed"]))
    return Corpus(
        corpus.tokens.astype(corpus.vocab.dtype),
        corpus.distance.astype(np.int64),
        corpus.group.astype(np.uint8),
        corpus.groups,
        corpus.vocab,
    )


def split(options: str, name: str) -> tuple[np.ndarray, Vocab]:
    """Split ``name`` of the corpus and its vocabulary (as ``repro.data.open_split`` gives any split)."""
    if name not in SPLITS:
        raise DataError(f"split must be one of {', '.join(SPLITS)}, got {name!r}")
    corpus = generate(options)
    a, b = split_bounds(len(corpus.tokens))[name]
    return corpus.tokens[a:b], corpus.vocab


def truth(options: str, name: str) -> Truth:
    """What every token of split ``name`` depends on (its distances reach back into earlier splits: a
    scorer decides what its view holds)."""
    corpus = generate(options)
    a, b = split_bounds(len(corpus.tokens))[name]
    return Truth(corpus.distance[a:b], corpus.group[a:b], corpus.groups)
