"""A tiny manifest for the spine tests (a 1-layer dense LM on a `file` corpus)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from storekit import stored_run  # noqa: F401 (the spine tests import it from here)

from repro.config import manifest as manifests


def tiny_manifest(
    corpus: Path,
    *,
    grid: str = "",
    claims: str = "",
    extra_train: str = "",
    extra_eval: str = "",
    name: str = "t-tiny",
    title: str = "A tiny test manifest",
) -> str:
    return (
        textwrap.dedent(f"""\
        name: {name}
        title: "{title}"
        paper: suite
        renders: [curves]
        base:
          data: {{name: file, path: "{corpus}", kind: text8, block: 32}}
          model: {{family: sparse_transformer, pattern: dense, layers: 1, d_model: 32, heads: 2, stride: 16}}
          train: {{optimizer: adam, lr: 3.0e-3, batch_size: 4, steps: 30, checkpoint_every: 10, log_every: 5{extra_train}}}
          eval: {{batch_size: 32, min_context: 16{extra_eval}}}
        scales:
          tiny: {{}}
        """)
        + grid
        + claims
    )


def shipped(root: Path = manifests.SHIPPED) -> dict[str, Path]:
    """The shipped manifests under ``root`` by name: what the tests that hold every shipped manifest to
    reviewed values enumerate (a user's own under experiments/local/ left out)."""
    return manifests.discover(root, local=False)
