"""One small store shared by the tracking tests: two 5-step adaptive-span runs trained in a real
``repro run`` process with W&B offline, so every test reads real offline W&B runs (no network)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

# Public domain (Lincoln, 1863), repeated with numbered markers to fill the 90/5/5 split.
_TEXT = (
    "Four score and seven years ago our fathers brought forth on this continent, a new nation, "
    "conceived in Liberty, and dedicated to the proposition that all men are created equal. "
)

MANIFEST = """\
name: t-track
title: "A tiny adaptive-span manifest for the tracking tests"
paper: adaptive_span
renders: [curves]
base:
  data: {{name: file, path: "{corpus}", kind: text8, block: 32}}
  model: {{family: adaptive_span, layers: 2, d_model: 16, d_ff: 32, heads: 2, dropout: 0.0,
          span: {{kind: adaptive, limit: 32, ramp: 8}}}}
  train: {{optimizer: adam, lr: 3.0e-3, batch_size: 4, steps: 5, checkpoint_every: 5, log_every: 1,
          val_every: 2, val_tokens: 64}}
  eval: {{batch_size: 32}}
grid:
  model.span.limit: [16, 32]
scales:
  tiny: {{}}
reference:  # made up for the tests: a paper number for one cell only
  runs:
    - {{match: {{limit: 16}}, label: "a reference row", test_bits: 1.25}}
claims:
  - {{id: learns, text: "test bits below a uniform guess", check: "test_bits[] < 4.76"}}
"""


@dataclass
class Store:
    base: Path
    root: Path  # the results root
    manifest: Path
    env: dict[str, str]  # environment of the process that trained it

    def repro(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "repro", *args], env=self.env, capture_output=True, text=True, **kwargs
        )


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> Store:
    base = tmp_path_factory.mktemp("tracked")
    corpus = base / "corpus.txt"
    corpus.write_text("".join(f"Part {i}. {_TEXT}" for i in range(150)))
    manifest = base / "t-track.yaml"
    manifest.write_text(textwrap.dedent(MANIFEST.format(corpus=corpus)))
    env = {
        **os.environ,
        "REPRO_DATA": str(base / "data"),
        "REPRO_RESULTS": str(base / "results"),
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
    }
    env.pop("WANDB_API_KEY", None)
    done = Store(base, base / "results", manifest, env).repro("run", str(manifest))
    assert done.returncode == 0, done.stderr[-3000:]
    return Store(base, base / "results", manifest, env)


@pytest.fixture
def isolated_env(store: Store) -> dict[str, str]:
    """The tests read the shared store (W&B offline), not a fresh root each."""
    return {key: store.env[key] for key in ("REPRO_DATA", "REPRO_RESULTS", "WANDB_MODE", "WANDB_SILENT")}
