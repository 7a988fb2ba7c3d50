"""The far-context pilot's Debian corpora: which files make each text, in what order, pinned."""

import numpy as np
import pytest

import repro.data as data
from repro.data import catalog, debian_text
from repro.data.errors import DataError


def _tree(root, files: dict[str, bytes]):
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content)
    return root


@pytest.mark.parametrize(
    "name,files,expected",
    [
        (
            "unicode-data",
            {"UnicodeData.txt": b"0041;LATIN CAPITAL LETTER A;Lu\n" * 40, "Blocks.txt": b"0000..007F; Basic Latin\n"},
            b"0041;LATIN CAPITAL LETTER A;Lu\n" * 40,
        ),
        (
            "iso-codes",
            {"iso_639-2.json": b'{"b": 2}' * 30, "iso_3166-1.json": b'{"a": 1}\n' * 30, "schema-3166-1.json": b"{}"},
            b'{"a": 1}\n' * 30 + b'{"b": 2}' * 30 + b"\n",  # sorted by path; a missing final newline added
        ),
        (
            "eigen-headers",
            {"Eigen/src/Core/Matrix.h": b"class Matrix;\n" * 20, "Eigen/Dense": b"#include\n", "a.h": b"int a;\n" * 20},
            b"class Matrix;\n" * 20 + b"int a;\n" * 20,  # "Eigen/src/..." sorts before "a.h"
        ),
    ],
)
def test_pilot_corpus_joins_its_files_in_path_order(root, tmp_path, releases, name, files, expected):
    src = _tree(tmp_path / "pkg", files)
    package = catalog.CATALOG[name].debian
    joined, _ = debian_text.joined(src, debian_text._FILES[package.name])
    assert joined == expected
    releases(name, {"1.0-1": {"text": expected}})
    data.prepare(name, src=src)
    parts = [data.open_split(name, s)[0] for s in ("train", "valid", "test")]
    assert np.concatenate(parts).tobytes() == expected


def test_pilot_corpus_refuses_other_content_and_an_empty_folder(root, tmp_path, releases):
    src = _tree(tmp_path / "pkg", {"UnicodeData.txt": b"0041;A\n" * 40})
    releases("unicode-data", {"1.0-1": {"text": b"something else\n" * 40}})
    with pytest.raises(DataError, match="expected a pinned release"):
        data.prepare("unicode-data", src=src)
    with pytest.raises(DataError, match="no files matching UnicodeData.txt"):
        debian_text.joined(tmp_path / "empty", "UnicodeData.txt")
