"""The official code's symbols and token streams, derived from the suite's own splits, and the numbering
that puts them onto the suite's vocabulary.

The official ``data.py`` reads ``train.txt``, ``valid.txt`` and ``test.txt`` line by line: a line's
whitespace-separated tokens, then ``<eos>``. It numbers the symbols by their first appearance in
``train.txt``. Its ``get_data.sh`` writes those files from the same 90M / 5M / 5M splits the suite stores
(:func:`repro.data.on_disk.split_bounds`), so the official streams follow from the suite's splits exactly:

* text8 (Transformer-XL's ``prep_text8.py``): each split ``.strip()``-ped of its leading and trailing
  spaces, its characters joined by spaces, ``_`` for a space, on one line: the characters, then one
  ``<eos>``. The suite's 27 symbols lack ``<eos>``: the model gets it as a 28th.
* enwik8 (``prep_enwik8.py``): each byte as its decimal value, a newline kept as a line break: every
  newline byte becomes ``<eos>``, and one more ``<eos>`` ends the split when its last byte is not a
  newline. The suite's ``as205`` vocabulary holds the same 205 symbols (the newline byte is ``<eos>``).

The model's numbering (:class:`Symbols`) is the suite's (so its data feeds the model as it is), followed
by the official symbols the suite's vocabulary lacks. The map from the official ids is computed from the
train split as the official code computes it, never assumed; :mod:`repro.pretrained.imported` then checks
that the mapped weights predict the data (far better than its unigram statistics).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repro.data.vocab import TEXT8_ALPHABET, Vocab
from repro.pretrained.checkpoint import ImportRefused

EOS = "<eos>"
TEXT8, ENWIK8 = "text8", "enwik8"  # the two preparations of get_data.sh
NEWLINE = 10


def preparation(vocab: Vocab, dataset: str) -> str:
    """Which of get_data.sh's preparations made the official files of a corpus with ``vocab``."""
    if vocab.alphabet == TEXT8_ALPHABET:
        return TEXT8
    if vocab.byte_values is not None and len(vocab.byte_values) < 256:
        return ENWIK8
    hint = " (enwik8: use data.vocab: as205, the official code's observed symbols)" if vocab.byte_values else ""
    raise ImportRefused(
        f"dataset {dataset}: a {vocab.size}-symbol {vocab.unit} vocabulary is not one the official code "
        f"prepares; allowed: text8's 27 characters or a byte corpus's observed bytes{hint}"
    )


def official_name(vocab: Vocab, prep: str, i: int) -> str:
    """The token the official files write for the suite's symbol ``i``."""
    if prep == TEXT8:
        return "_" if vocab.alphabet[i] == " " else vocab.alphabet[i]
    byte = vocab.byte_values[i]
    return EOS if byte == NEWLINE else str(byte)


@dataclass(frozen=True)
class Symbols:
    """The imported model's symbols: the suite's vocabulary, then the official symbols it lacks."""

    names: tuple[str, ...]  # the official token of each model id
    suite: int  # the first ids are the suite's vocabulary, the rest official symbols it lacks
    prep: str  # text8 | enwik8
    strip: int | None  # text8: the id of the space that prep_text8 strips from each split's ends
    newline: int | None  # enwik8: the id of the newline byte (an <eos> of its own)
    eos: int  # the model id of <eos>

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def extra(self) -> tuple[str, ...]:
        """The symbols beyond the suite's vocabulary (text8: ``<eos>``)."""
        return self.names[self.suite :]

    def stream(self, ids: np.ndarray) -> np.ndarray:
        """The official token stream of a suite split ``ids``, in the model's numbering (the narrowest
        unsigned dtype that holds it: a 90M-token train split stays 90 MB)."""
        ids = np.asarray(ids)
        dtype = np.uint8 if self.size <= 256 else np.uint16
        if self.prep == TEXT8:
            kept = np.flatnonzero(ids != self.strip)
            ids = ids[kept[0] : kept[-1] + 1] if len(kept) else ids[:0]
            return np.concatenate([ids.astype(dtype), np.array([self.eos], dtype=dtype)])
        ends = len(ids) > 0 and ids[-1] == self.newline
        return np.concatenate([ids.astype(dtype), np.array([] if ends else [self.eos], dtype=dtype)])


def symbols(vocab: Vocab, dataset: str) -> Symbols:
    """The model's numbering for a corpus of the suite's ``vocab`` (``dataset`` names it in errors)."""
    prep = preparation(vocab, dataset)
    names = [official_name(vocab, prep, i) for i in range(vocab.size)]
    n = len(names)
    if prep == TEXT8:
        return Symbols((*names, EOS), n, prep, vocab.alphabet.index(" "), None, n)
    if EOS in names:
        return Symbols(tuple(names), n, prep, None, names.index(EOS), names.index(EOS))
    return Symbols((*names, EOS), n, prep, None, None, n)  # a corpus without a newline


def official_order(syms: Symbols, train: np.ndarray, rows: int, where: str) -> np.ndarray:
    """Model id of each official id: the symbols of the official train stream ``train`` (:meth:`Symbols.stream`
    of the train split) in order of first appearance, as the official ``data.Dictionary`` numbers them.
    ``rows``: the checkpoint's symbols, which must be exactly these (``where`` names the checkpoint)."""
    present, first = np.unique(train, return_index=True)
    order = present[np.argsort(first, kind="stable")]
    if len(order) != rows:
        raise ImportRefused(
            f"{where}: the checkpoint predicts {rows} symbols, but the official code numbers {len(order)} in "
            "this train split: not the data it was trained on"
        )
    absent = sorted(set(range(syms.size)) - set(order.tolist()))
    if absent:
        raise ImportRefused(
            f"{where}: symbol {syms.names[absent[0]]!r} of the suite's vocabulary never occurs in the train split, "
            "so the official vocabulary lacks it and the model cannot predict it"
        )
    return order.astype(np.int64)
