import numpy as np
import pytest

from repro.data import vocab as vocabs
from repro.data.errors import DataError
from repro.data.textfilter import text8_filter


def test_text8_filter_follows_wikifil_rules():
    raw = "Hello, World!\nIn 1984 Émile ran 2km.\tÀ la CAFÉ".encode()
    assert text8_filter(raw) == b" hello world in one nine eight four mile ran two km la caf"


def test_text8_filter_output_is_27_symbols_single_spaced():
    out = text8_filter(bytes(range(256)) * 3)
    assert set(out) <= set(b" abcdefghijklmnopqrstuvwxyz")
    assert b"  " not in out and out.startswith(b" ") and not out.endswith(b" ")


def test_text8_vocab_round_trip():
    v = vocabs.text8()
    ids = v.encode(" the cat")
    assert ids.dtype == np.uint8 and ids.tolist() == [0, 20, 8, 5, 0, 3, 1, 20]
    assert v.decode(ids) == " the cat"
    with pytest.raises(DataError, match="not in the 27-symbol"):
        v.encode("The")


def test_byte_vocabularies():
    raw = vocabs.raw_bytes()
    assert raw.size == 256 and raw.decode(raw.encode("naïve\n")) == "naïve\n"
    counts = np.zeros(256, dtype=np.int64)
    counts[[10, 97, 98]] = 1
    compact = vocabs.present_bytes(counts)
    assert compact.size == 3 and compact.symbol(0) == "<eos>"
    assert compact.encode("ab\n").tolist() == [1, 2, 0] and compact.decode([1, 2, 0]) == "ab\n"
    with pytest.raises(DataError):
        compact.encode("c")


def test_vocab_json_round_trip_and_values():
    for v in (vocabs.text8(), vocabs.raw_bytes(), vocabs.values(256, "dim")):
        assert vocabs.Vocab.from_json(v.to_json()) == v
    assert "values" in vocabs.values(256, "dim").decode(np.arange(10))
    assert vocabs.Vocab(300, "char", alphabet="".join(map(chr, range(300)))).dtype == np.uint16
