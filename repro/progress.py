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


def plan_line(
    k: int,
    n: int,
    elapsed: float,
    remaining_steps: int,
    per_step: float | None,
    remaining_runs: int = 0,
    per_run: float | None = None,
) -> str:
    """``[k/n] elapsed 3m12s, ETA 10m04s``: the training steps left at the stored s/step, plus each run
    left's evaluation (and start-up) at the seconds the stored or just finished runs took for theirs."""
    if not per_step:
        return f"[{k}/{n}] elapsed {duration(elapsed)}, ETA after a run is timed"
    left = per_step * remaining_steps + (per_run or 0.0) * remaining_runs
    counted = "stored s/step and evaluation time" if per_run is not None else "stored s/step; evaluation not timed yet"
    return f"[{k}/{n}] elapsed {duration(elapsed)}, ETA {duration(left)} ({counted})"
