"""Fixtures for the spine tests: a small real-text corpus as a `file` dataset, manifests in tmp dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from spine_manifests import tiny_manifest
from textcorpus import write_corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus.txt")


@pytest.fixture
def write_manifest(tmp_path: Path, corpus: Path):
    def write(text: str | None = None, name: str = "m.yaml", **kwargs) -> Path:
        path = tmp_path / name
        path.write_text(text if text is not None else tiny_manifest(corpus, **kwargs))
        return path

    return write
