"""Helpers for tests that write stored runs by hand: a finished run without training, a training curve the
trajectory gate can read."""

from pathlib import Path


def steady_curve(run, bits: float, points: int = 10, every: int = 10) -> None:
    """Append to ``run`` a training-bits curve that falls steadily to ``bits`` (so arms whose final bits
    differ keep that order along their curves, as the verdicts' trajectory gate asks)."""
    run.append_metrics([{"step": every * (k + 1) - 1, "train/bits": bits + 1.0 / (k + 1)} for k in range(points)])


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
