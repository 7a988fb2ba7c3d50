"""Progress lines for logs (off a TTY, where Lightning's bar is off): ``repro run``'s line per run with the
ETA of what is left, and the durations a training run's lines show (:class:`repro.train.module.ProgressLines`).
No Lightning here: the CLI imports this module at start-up."""

from __future__ import annotations


def say(line: str) -> None:
    """Print a line now (a pipe or a cluster log buffers otherwise)."""
    print(line, flush=True)


def duration(seconds: float) -> str:
    """``45s``, ``3m12s``, ``2h05m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def plan_line(k: int, n: int, elapsed: float, remaining_steps: int, per_step: float | None) -> str:
    """``[k/n] elapsed 3m12s, ETA 10m04s`` (the training steps left at the stored s/step)."""
    eta = f"ETA {duration(per_step * remaining_steps)} (stored s/step)" if per_step else "ETA after a run is timed"
    return f"[{k}/{n}] elapsed {duration(elapsed)}, {eta}"
