"""Fixtures for the spine tests: a small real-text corpus as a `file` dataset, manifests in tmp dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from spine_manifests import tiny_manifest
from textcorpus import write_corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus.txt")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPRO_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


@pytest.fixture
def write_manifest(tmp_path: Path, corpus: Path):
    def write(text: str | None = None, name: str = "m.yaml", **kwargs) -> Path:
        path = tmp_path / name
        path.write_text(text if text is not None else tiny_manifest(corpus, **kwargs))
        return path

    return write
