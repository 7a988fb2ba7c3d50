"""The paper-scale recipe options in real runs: stream passes at seeded random offsets with the cache reset
(the official adaptive-span trainer), the best-validation weights scored (the Sparse Transformer paper),
and both surviving a SIGKILL and resume exactly."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from repro.config import manifest as manifests
from repro.data import open_split
from repro.data.batching import StreamBatches
from repro.report import stage as report
from repro.sample.trained import load_trained
from repro.store.runs import RunDir
from repro.train import runner
from repro.train.evaluation import evaluate
from repro.train.selection import BEST

# A child process that trains the manifest ARGV[1]'s first tiny run into results root ARGV[2] and
# SIGKILLs itself after step ARGV[3] (the interrupted run; tests/faults holds the fault matrix, this checks
# that the recipe's selection and stream passes survive one).
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

TEXT = (
    "it is a truth universally acknowledged that a single man in possession of a good fortune must be in "
    "want of a wife however little known the feelings or views of such a man may be on his first entering "
    "a neighbourhood this truth is so well fixed in the minds of the surrounding families "
)


@pytest.fixture
def as_manifest(tmp_path: Path) -> Path:
    """A 1-layer adaptive-span (fixed 32) model on a short corpus (a pass over it is 33 blocks of 16), at an lr
    high enough that its quick validations stop improving before the end."""
    corpus = tmp_path / "austen.txt"
    corpus.write_text(" ".join(f"chapter {i} {TEXT}" for i in range(16)))
    path = tmp_path / "as.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: t-as
        title: "recipe options"
        paper: suite
        renders: [curves]
        base:
          data: {{name: file, path: "{corpus}", kind: text8, block: 16}}
          model: {{family: adaptive_span, layers: 1, d_model: 16, d_ff: 32, heads: 2, dropout: 0.0,
                  window: past, span: {{kind: fixed, limit: 32}}}}
          train: {{optimizer: adam, lr: 1.0e-1, batch_size: 8, steps: 40, checkpoint_every: 10, log_every: 5,
                  val_every: 5, val_tokens: 512, stream_passes: random_offset, select: best_valid}}
          eval: {{batch_size: 8}}
        scales:
          tiny: {{}}
        """)
    )
    return path


class CacheLengths(pl.Callback):
    """The recurrent cache's length after every training step."""

    def __init__(self):
        self.lengths: list[int] = []

    def on_train_batch_end(self, trainer, pl_module, *args):
        self.lengths.append(pl_module._state[0].shape[1])


def test_passes_reset_the_cache_best_weights_are_scored_and_a_resume_is_exact(tmp_path, as_manifest):
    m = manifests.load(as_manifest)
    (spec,) = m.expand("tiny")
    lengths = CacheLengths()
    straight = runner.run_spec(spec, m, tmp_path / "straight", callbacks=[lengths])
    assert straight.status == "finished"

    # cache: grows by a block per step up to the 32 states the past window keeps (S), and starts afresh
    # (one block) exactly where a new pass begins
    train, _ = open_split(**{"name": "file", "split": "train", **spec.data.options()})
    batches = StreamBatches(train, 8, 16, "random_offset", seed=0)
    starts = [i for i in range(40) if batches.starts_pass(i)]
    assert starts and all(lengths.lengths[i] == 16 for i in [0, *starts])
    assert all(lengths.lengths[i] == min(32, lengths.lengths[i - 1] + 16) for i in range(1, 40) if i not in starts)

    # selection: best.ckpt holds the step with the lowest quick validation, and those weights were scored
    run = RunDir(tmp_path / "straight", m.name, spec.run_id)
    quick = run.metrics().dropna(subset=["valid/bits_quick"])
    best = quick.loc[quick["valid/bits_quick"].idxmin()]
    summary = straight.summary
    assert summary["selected"] == "best_valid" and summary["selected_step"] == int(best["step"]) + 1
    assert summary["selected_valid_bits_quick"] == pytest.approx(best["valid/bits_quick"])
    model, _, vocab, _ = load_trained(run)
    valid, _ = open_split(**{"name": "file", "split": "valid", **spec.data.options()})
    assert evaluate(model, valid, spec, torch.device("cpu"), vocab.size)["bits"] == pytest.approx(summary["valid_bits"])
    last = torch.load(run.last_checkpoint, weights_only=False)["state_dict"]
    assert summary["selected_step"] < 40  # lr 0.1 is high enough that the last validations got worse
    assert any(not torch.equal(v, last[f"model.{k}"]) for k, v in model.state_dict().items())

    # the report says how the bits were scored and which weights
    text = report.render(m, tmp_path / "straight")[0].read_text()
    assert (
        f"Evaluation: each split read as 8 contiguous streams, block by block, carrying the model's cache; "
        f"every target scored once; the weights of the best quick validation (step {summary['selected_step']}) "
        f"scored, not the last."
    ) in text

    # a SIGKILL after the first pass boundary, resumed from the step-20 checkpoint: the same run. The child
    # computes on as many threads as this process (other test modules set 1 on import): a different thread
    # count sums in another order, and the last bits of the quick validations can pick another best step
    killed = tmp_path / "killed"
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, str(as_manifest), str(killed), "25"],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())},
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert (RunDir(killed, m.name, spec.run_id).checkpoints / BEST).exists()
    resumed = runner.run_spec(spec, m, killed)
    for key in ("valid_bits", "test_bits", "selected_valid_bits_quick"):
        assert resumed.summary[key] == pytest.approx(summary[key], abs=1e-4)
    assert resumed.summary["selected_step"] == summary["selected_step"]


def test_best_valid_needs_quick_validation(tmp_path, as_manifest):
    as_manifest.write_text(as_manifest.read_text().replace("val_every: 5", "val_every: 0"))
    with pytest.raises(manifests.ManifestError, match="train.select: best_valid.*val_every"):
        manifests.load(as_manifest)


@pytest.mark.parametrize("name,full", [("as-table1", 250_000), ("as-table2", 150_000)])
def test_large_models_train_the_papers_steps_then_20k_more_at_a_tenth(name, full):
    """The paper and the official scripts: 250k (text8) / 150k (enwik8) steps at lr 0.07, then 20k more at
    lr / 10 (`--niter 250` then `--lr 0.007 --niter 270`)."""
    from repro.train.module import lr_factor

    (large,) = [s for s in manifests.resolve(name).expand("paper") if s.cell["variant"] == "adaptive-large"]
    factors = [lr_factor(step, large.train) for step in range(large.train.steps)]
    assert len(factors) == full + 20_000
    assert factors[large.train.warmup : full] == [1.0] * (full - large.train.warmup)
    assert factors[full:] == [pytest.approx(0.1)] * 20_000
