"""Vocabularies: how stored token ids map to the symbols they stand for.

Three shapes cover every dataset:

* byte vocabularies (``byte_values``): id -> byte value. The identity over 256 values is the raw-byte
  vocabulary of the Sparse Transformer; a subset with newline shown as ``<eos>`` is the adaptive-span
  code's vocabulary (205 symbols on enwik8).
* character vocabularies (``alphabet``): id -> character (text8's 27 symbols, or a file's characters).
* value vocabularies (neither): pixel intensities and mu-law audio levels, 0..size-1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repro.data.errors import DataError

TEXT8_ALPHABET = " abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Vocab:
    """The symbols of a token stream. ``size`` counts the data symbols; ``unit`` is what one token is."""

    size: int
    unit: str  # "char" | "byte" | "dim" | "sample" | "symbol" (a synthetic corpus)
    alphabet: str | None = None
    byte_values: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        table = self.alphabet if self.alphabet is not None else self.byte_values
        if table is not None and len(table) != self.size:
            raise ValueError(f"vocabulary table has {len(table)} symbols, size says {self.size}")

    @property
    def dtype(self) -> np.dtype:
        """The narrowest unsigned dtype holding every id."""
        return np.dtype(np.uint8 if self.size <= 256 else np.uint16)

    def symbol(self, i: int) -> str:
        """A printable name for id ``i`` (newline in a byte vocabulary subset is ``<eos>``)."""
        if self.alphabet is not None:
            return self.alphabet[i]
        if self.byte_values is not None:
            b = self.byte_values[i]
            return "<eos>" if b == 10 and self.size < 256 else repr(bytes([b]))[2:-1]
        return str(i)

    def decode(self, ids) -> str:
        """Text for a sequence of ids; images and audio return a short repr of the values."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        if self.alphabet is not None:
            return "".join(self.alphabet[i] for i in ids)
        if self.byte_values is not None:
            table = np.asarray(self.byte_values, dtype=np.uint8)
            return table[ids].tobytes().decode("utf-8", errors="replace")
        return f"<{len(ids)} {self.unit} values: {ids[:8].tolist()}{'...' if len(ids) > 8 else ''}>"

    def encode(self, text: str) -> np.ndarray:
        """Ids for ``text``; symbols outside the vocabulary raise DataError."""
        if self.alphabet is not None:
            index = {c: i for i, c in enumerate(self.alphabet)}
            missing = sorted({c for c in text if c not in index})
            if missing:
                raise DataError(f"characters not in the {self.size}-symbol vocabulary: {''.join(missing)!r}")
            return np.fromiter((index[c] for c in text), dtype=self.dtype, count=len(text))
        if self.byte_values is not None:
            raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
            lut = np.full(256, -1, dtype=np.int64)
            lut[list(self.byte_values)] = np.arange(self.size)
            ids = lut[raw]
            if (ids < 0).any():
                bad = sorted(set(raw[ids < 0].tolist()))
                raise DataError(f"bytes not in the {self.size}-symbol vocabulary: {bad}")
            return ids.astype(self.dtype)
        raise DataError(f"a {self.unit} vocabulary has no text encoding")

    def to_json(self) -> dict:
        return {
            "size": self.size,
            "unit": self.unit,
            "alphabet": self.alphabet,
            "byte_values": list(self.byte_values) if self.byte_values is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict) -> Vocab:
        bv = d.get("byte_values")
        return cls(
            size=d["size"],
            unit=d["unit"],
            alphabet=d.get("alphabet"),
            byte_values=tuple(bv) if bv is not None else None,
        )


def raw_bytes() -> Vocab:
    """The Sparse Transformer's vocabulary: all 256 byte values, id = byte."""
    return Vocab(256, "byte", byte_values=tuple(range(256)))


def text8() -> Vocab:
    """text8's 27 symbols: space (id 0) and a-z (ids 1-26)."""
    return Vocab(27, "char", alphabet=TEXT8_ALPHABET)


def values(size: int, unit: str) -> Vocab:
    """Pixel or audio levels 0..size-1."""
    return Vocab(size, unit)


def present_bytes(byte_counts: np.ndarray) -> Vocab:
    """The adaptive-span code's byte vocabulary: only the byte values that occur (newline is <eos>).

    Ids follow byte order; the adaptive-span code numbers symbols by first appearance instead, which
    changes no count and no loss.
    """
    present = tuple(int(b) for b in np.flatnonzero(np.asarray(byte_counts)))
    return Vocab(len(present), "byte", byte_values=present)
