"""The catalogue's declarative rows (repro.data.catalog._ROWS) hold what its 175 lines of positional
calls held: every dataset's info, prepare function, options, Debian package, --from and PyPI flag, in the
listing's order (the digest of that content as it was before the rows)."""

import hashlib

from repro.data import catalog

BEFORE = "0da621e0ef331d56426ff9c4fc6bdb7faacd56828fddfa11b759d64760458427"
ADDED_SINCE = ("unicode-data", "iso-codes", "eigen-headers")  # the far-context pilot's corpora (repro.data.debian_text)


def _content(d: catalog.Dataset) -> str:
    p = d.prepare
    return repr((d.info, f"{p.__module__}.{p.__qualname__}", sorted(d.options), d.debian, d.needs_from, d.pypi))


def test_catalog_content_is_unchanged():
    text = "\n".join(_content(catalog.get(n)) for n in catalog.names() if n not in ADDED_SINCE)
    assert hashlib.sha256(text.encode()).hexdigest() == BEFORE


def test_rows_name_only_known_fields():
    assert catalog.names()[:3] == ["text8", "enwik8", "wiki-lead8"]
    assert catalog.get("cifar10").info.shape == (32, 32, 3) and catalog.get("text8").info.shape is None
    assert catalog.get("linux-doc").from_registry and not catalog.get("audio").from_registry
