"""Fixtures for the data tests: a temporary data root, and pins for the small archives built in tests."""
from __future__ import annotations

import hashlib

import pytest

from repro.data.fetch import Pin


def pin_of(data: bytes, algo: str = "sha256") -> Pin:
    return Pin(len(data), hashlib.new(algo, data).hexdigest(), algo)


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A fresh data root, also set as $REPRO_DATA so nothing touches the user's cache."""
    r = tmp_path / "data-root"
    monkeypatch.setenv("REPRO_DATA", str(r))
    return r


@pytest.fixture
def pin():
    return pin_of
