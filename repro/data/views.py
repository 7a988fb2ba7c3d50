"""Alternative views of prepared data, chosen by :func:`repro.data.open_split` options.

* ``vocab="as205"`` (byte corpora): the adaptive-span code's vocabulary — only the byte values that
  occur in the corpus, newline as ``<eos>`` (205 symbols on enwik8). The re-numbered split is cached
  next to the raw one as ``<split>.as205.npy`` the first time it is asked for, with its sha256 beside it
  (``.sha256``): a cached view that no longer matches is derived again from the checked split.
* ``seq_len=L`` (audio): the split's sample stream cut into ``L``-sample sequences, ragged end dropped.
"""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np

from repro.data import vocab as vocabs
from repro.data.errors import DataError
from repro.data.fetch import digest_file
from repro.data.on_disk import write_array
from repro.files import atomic

BYTE_VOCABS = ("bytes", "as205")


def byte_vocab_view(
    directory: Path, meta: dict, split: str, array: np.ndarray, choice: str
) -> tuple[np.ndarray, vocabs.Vocab]:
    if choice not in BYTE_VOCABS:
        raise DataError(f"vocab must be one of {', '.join(BYTE_VOCABS)}, got {choice!r}")
    if "byte_counts" not in meta:
        raise DataError(
            f"vocab={choice!r} applies to byte corpora only; this one has a "
            f"{meta['vocab']['size']}-symbol {meta['vocab']['unit']} vocabulary"
        )
    if choice == "bytes":
        return array, vocabs.raw_bytes()
    vocab = vocabs.present_bytes(np.asarray(meta["byte_counts"]))
    path = directory / f"{split}.as205.npy"
    if not _intact(path):  # absent, or changed since written: derived again from the (checked) split
        lut = np.zeros(256, dtype=np.uint8)
        lut[list(vocab.byte_values)] = np.arange(vocab.size)
        mode = stat.S_IMODE((directory / f"{split}.npy").stat().st_mode)
        write_array(path, lut[array], mode=mode)
        atomic.write_text(_digest_path(path), digest_file(path) + "\n", mode=mode)
    return np.load(path, mmap_mode="r", allow_pickle=False), vocab


_INTACT: set[tuple] = set()  # views this process hashed and found as their .sha256 records them


def _digest_path(view: Path) -> Path:
    return view.with_name(view.name + ".sha256")


def _intact(view: Path) -> bool:
    """A cached view matches the sha256 recorded when it was written (hashed once per process)."""
    try:
        st = view.stat()
        want = _digest_path(view).read_text().strip()
    except OSError:
        return False
    key = (str(view), st.st_ino, st.st_size, st.st_mtime_ns, want)
    if key not in _INTACT and digest_file(view) == want:
        _INTACT.add(key)
    return key in _INTACT


def sequence_view(stream: np.ndarray, seq_len) -> np.ndarray:
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 2:
        raise DataError(f"seq_len must be an integer >= 2, got {seq_len!r}")
    n = len(stream) // seq_len
    if n == 0:
        raise DataError(f"the split has {len(stream):,} samples, fewer than one sequence of {seq_len:,}")
    return stream[: n * seq_len].reshape(n, seq_len)
