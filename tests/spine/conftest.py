"""Fixtures for the spine tests: a small real-text corpus as a `file` dataset, manifests in tmp dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from spine_manifests import tiny_manifest

# A public-domain paragraph (the opening of the US Declaration of Independence), repeated with
# numbered section markers so the corpus is long enough for the 90/5/5 split.
_TEXT = (
    "When in the Course of human events, it becomes necessary for one people to dissolve the political "
    "bands which have connected them with another, and to assume among the powers of the earth, the "
    "separate and equal station to which the Laws of Nature and of Nature's God entitle them, a decent "
    "respect to the opinions of mankind requires that they should declare the causes which impel them "
    "to the separation. "
)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"Section {i}. {_TEXT}" for i in range(120)))
    return path


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
