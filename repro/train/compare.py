"""Where two stored runs of one id first differ in their numbers (``repro verify``).

Compared exactly (every bit): each row of the step-wise ``metrics.csv`` in step order, then every key of
the summary, then the ``analysis.npz`` arrays. Left out: what measures the machine rather than the
computation (the timing, memory and load keys and columns: :data:`MACHINE`), and
the records of where a run came from (its environment, its W&B id, a reused twin's origin). A key or a
column the stored run has and the re-executed one lacks is a difference; one only the re-executed run
has (written by newer code) is not.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repro.store.runs import RunDir

# a key (or a step-wise column's last part) containing one of these measures the machine, not the run:
# how long, how much memory, how busy the machine was (seconds_per_step, peak_memory_bytes, mfu,
# load_average_max, others_cores_mean, ran_alone, ...)
MACHINE = (
    "seconds",
    "memory",
    "peak_",
    "mfu",
    "flops_per_second",
    "load_average",
    "others_cores",
    "steal_cores",
    "ran_alone",
    "cpus",
)
# where the numbers were made and kept
PROVENANCE = frozenset({"environment", "wandb_run_id", "reused_from"})


def not_bits(key: str) -> bool:
    """Whether a summary key or a metrics column is left out of the comparison."""
    last = key.rsplit("/", 1)[-1]
    return last in PROVENANCE or any(word in last for word in MACHINE)


@dataclass(frozen=True)
class Difference:
    """The first difference: where (``step``; None for ``analysis.npz``), what, and both values."""

    step: int | None
    what: str
    stored: Any
    here: Any

    def __str__(self) -> str:
        where = f"at step {self.step}" if self.step is not None else "in analysis.npz"
        return f"differs {where}: {self.what} stored {_shown(self.stored)}, here {_shown(self.here)}"


def first_difference(stored: RunDir, here: RunDir) -> Difference | None:
    """The first number in which ``here`` (the re-executed run) leaves ``stored``; None: the same bits."""
    summary = stored.summary()
    return (
        _metrics(stored.metrics_path, here.metrics_path)
        or _summary(summary, here.summary(), summary.get("steps"))
        or _arrays(stored.path / "analysis.npz", here.path / "analysis.npz")
    )


def _metrics(stored: Path, here: Path) -> Difference | None:
    """The first step-wise value that differs, in the stored file's step order."""
    ours, theirs = _rows(stored), _rows(here)
    for step, row in ours.items():
        other = theirs.get(step)
        if other is None:
            return Difference(int(step), "metrics.csv row", "logged", "not logged")
        for column, value in row.items():
            if not_bits(column) or _same(value, other.get(column)):
                continue
            return Difference(int(step), column, value, other.get(column, "absent"))
    return None


def _rows(path: Path) -> dict[str, dict[str, str]]:
    """metrics.csv as step -> {column: the value's text} (empty cells left out: a column not logged then)."""
    if not path.exists():
        return {}
    with path.open(newline="") as f:
        return {row["step"]: {k: v for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)}


def _summary(stored: dict, here: dict, steps: int | None) -> Difference | None:
    for key in sorted(stored):
        if not_bits(key) or _equal(stored[key], here.get(key, _ABSENT)):
            continue
        return Difference(steps, f"summary {key}", stored[key], here.get(key, "absent"))
    return None


def _arrays(stored: Path, here: Path) -> Difference | None:
    if not stored.exists():
        return None
    if not here.exists():
        return Difference(None, "the file", "written", "not written")
    with np.load(stored) as ours, np.load(here) as theirs:
        for key in ours.files:
            if key not in theirs.files:
                return Difference(None, key, "an array", "absent")
            a, b = ours[key], theirs[key]
            if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
                return Difference(None, key, f"{a.dtype} {a.shape}", f"{b.dtype} {b.shape} (other values)")
    return None


_ABSENT = object()


def _same(a: str, b: str | None) -> bool:
    """Two cells of metrics.csv hold one number (text as written: exact; NaN equals NaN)."""
    if b is None:
        return False
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return x == y or (math.isnan(x) and math.isnan(y))


def _equal(a: Any, b: Any) -> bool:
    """JSON values equal bit for bit (NaN equals NaN), lists and mappings element by element."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _shown(value: Any) -> str:
    """A value as the line shows it: floats with every digit (the last bits are the point)."""
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."
