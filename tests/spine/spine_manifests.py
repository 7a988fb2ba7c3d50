"""A tiny manifest for the spine tests (a 1-layer dense LM on a `file` corpus)."""

from __future__ import annotations

import textwrap
from pathlib import Path

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


def stored_run(root: Path, spec, curve: bool = True, **summary):
    """A finished run of ``spec`` in the store at ``root`` with the ``summary`` keys given (no training):
    its spec.yaml as the runner writes it, its summary on the file dataset, and (``curve``) a training curve
    that falls steadily to its test bits, as the trajectory gate reads."""
    from repro.store.runs import RunDir

    run = RunDir(root, spec.manifest, spec.run_id)
    run.write_spec(spec.record(None))
    run.write_summary({"status": "finished", "dataset": "file", "scale": spec.scale, **summary})
    if curve and "test_bits" in summary:
        run.append_metrics([{"step": 10 * i + 9, "train/bits": summary["test_bits"] + 1 / (i + 1)} for i in range(10)])
    return run
