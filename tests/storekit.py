"""Helpers for tests that write stored runs by hand: a training curve the trajectory gate can read."""


def steady_curve(run, bits: float, points: int = 10, every: int = 10) -> None:
    """Append to ``run`` a training-bits curve that falls steadily to ``bits`` (so arms whose final bits
    differ keep that order along their curves, as the verdicts' trajectory gate asks)."""
    run.append_metrics([{"step": every * (k + 1) - 1, "train/bits": bits + 1.0 / (k + 1)} for k in range(points)])
