"""A tiny manifest for the spine tests (a 1-layer dense LM on a `file` corpus), and a child that kills itself."""

from __future__ import annotations

import textwrap
from pathlib import Path


def tiny_manifest(
    corpus: Path, *, grid: str = "", claims: str = "", extra_train: str = "", extra_eval: str = "", name: str = "t-tiny"
) -> str:
    return (
        textwrap.dedent(f"""\
        name: {name}
        title: "A tiny test manifest"
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


# A child process that trains the manifest ARGV[1]'s first tiny run into results root ARGV[2] and
# SIGKILLs itself after step ARGV[3] (the resume tests' interrupted run).
KILLER = textwrap.dedent("""\
    import os, signal, sys
    import lightning.pytorch as pl
    from pathlib import Path
    from repro.config import manifest
    from repro.train import runner

    class KillAt(pl.Callback):
        def on_train_batch_end(self, trainer, *args):
            if trainer.global_step == int(sys.argv[3]):
                os.kill(os.getpid(), signal.SIGKILL)

    m = manifest.load(sys.argv[1])
    runner.run_spec(m.expand("tiny")[0], m, Path(sys.argv[2]), callbacks=[KillAt()])
    """)
