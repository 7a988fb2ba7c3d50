"""Where two stored runs of one id differ in their numbers (``repro verify``): the first difference, and
the largest between two numbers, from one walk over them (:func:`differences`, summed up by :func:`compare`).

Compared exactly (every bit): each row of the step-wise ``metrics.csv`` in step order, then every key of
the summary, then the ``analysis.npz`` arrays. Left out: what measures the machine rather than the
computation (the timing, memory and load keys and columns: :data:`MACHINE`), and
the records of where a run came from (its environment, its W&B id, a reused twin's origin, what a retraining replaced). A key or a
column the stored run has and the re-executed one lacks is a difference; one only the re-executed run
has (written by newer code) is not. The largest difference is relative to the stored number
(:meth:`Gap.relative`; a summary value's list or mapping leaf by leaf, an array element by element);
a difference not between two numbers (a row, key or array missing, a string, a shape) has none, and
no tolerance passes it.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repro.files import safeyaml
from repro.store.runs import CorruptFile, RunDir

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
PROVENANCE = frozenset({"environment", "wandb_run_id", "reused_from", "replaces"})


def not_bits(key: str) -> bool:
    """Whether a summary key or a metrics column is left out of the comparison."""
    last = key.rsplit("/", 1)[-1]
    return last in PROVENANCE or any(word in last for word in MACHINE)


@dataclass(frozen=True)
class Gap:
    """Two numbers that differ: where (``step``; None for ``analysis.npz``), which, and both values (as
    stored: a metrics.csv cell's text, a summary's number, an array's element)."""

    step: int | None
    what: str
    stored: Any
    here: Any

    @property
    def absolute(self) -> float:
        """``|stored - here|`` (NaN where one of them is NaN)."""
        return abs(float(self.stored) - float(self.here))

    @property
    def relative(self) -> float:
        """``|stored - here| / |stored|``: what ``repro verify --tolerance`` bounds; infinite where the
        stored number is 0 or either is NaN or infinite (no relative difference is small enough then)."""
        stored, gap = float(self.stored), self.absolute
        return gap / abs(stored) if stored != 0 and math.isfinite(gap) and math.isfinite(stored) else math.inf

    def __str__(self) -> str:
        where = f"at step {self.step}" if self.step is not None else "in analysis.npz"
        return (
            f"{self.what} {where}, stored {_shown(self.stored)}, here {_shown(self.here)}, "
            f"|diff| {self.absolute:.3g} (relative {self.relative:.3g})"
        )


def _rank(gap: Gap) -> tuple[float, float]:
    """The order of "largest": the relative difference, then the absolute (NaN counted as the largest)."""
    absolute = gap.absolute
    return gap.relative, math.inf if math.isnan(absolute) else absolute


@dataclass(frozen=True)
class Difference:
    """A difference: where (``step``; None for ``analysis.npz``), what, and both values; ``gap``: the two
    numbers that differ most in it (a cell, a summary value's farthest leaf, an array's farthest element),
    None where it is not a difference between numbers (a row or key missing, a string, a shape)."""

    step: int | None
    what: str
    stored: Any
    here: Any
    gap: Gap | None = None

    def __str__(self) -> str:
        where = f"at step {self.step}" if self.step is not None else "in analysis.npz"
        return f"differs {where}: {self.what} stored {_shown(self.stored)}, here {_shown(self.here)}"


@dataclass(frozen=True)
class Comparison:
    """Two summaries of one walk over the differences: the first (the bit-exact verdict's), the largest
    between two numbers (relative: :meth:`Gap.relative`), and the first that is not between numbers."""

    first: Difference | None
    largest: Gap | None
    unnumbered: Difference | None

    def within(self, tolerance: float) -> bool:
        """Whether every difference is between two numbers at most ``tolerance`` apart, relatively."""
        if self.first is None:
            return True
        return self.unnumbered is None and self.largest is not None and self.largest.relative <= tolerance


def first_difference(stored: RunDir, here: RunDir) -> Difference | None:
    """The first number in which ``here`` (the re-executed run) leaves ``stored``; None: the same bits."""
    return next(differences(stored, here), None)


def compare(stored: RunDir, here: RunDir) -> Comparison:
    """The first difference, the largest, and the first not between numbers, from one walk."""
    first = largest = unnumbered = None
    for difference in differences(stored, here):
        first = first or difference
        if difference.gap is None:
            unnumbered = unnumbered or difference
        elif largest is None or _rank(difference.gap) > _rank(largest):
            largest = difference.gap
    return Comparison(first, largest, unnumbered)


def differences(stored: RunDir, here: RunDir) -> Iterator[Difference]:
    """Every difference of ``here`` from ``stored``, in the comparison's order (the module docstring's)."""
    summary = stored.summary()
    yield from _metrics(stored.metrics_path, here.metrics_path)
    yield from _summary(summary, here.summary(), summary.get("steps"))
    yield from _arrays(stored.path / "analysis.npz", here.path / "analysis.npz")


def _metrics(stored: Path, here: Path) -> Iterator[Difference]:
    """The step-wise values that differ, in the stored file's step order."""
    ours, theirs = _rows(stored), _rows(here)
    for step, row in ours.items():
        other = theirs.get(step)
        if other is None:
            yield Difference(int(step), "metrics.csv row", "logged", "not logged")
            continue
        for column, value in row.items():
            if not_bits(column) or _same(value, other.get(column)):
                continue
            there = other.get(column)
            gap = Gap(int(step), column, value, there) if there is not None and _cells(value, there) else None
            yield Difference(int(step), column, value, other.get(column, "absent"), gap)


def _rows(path: Path) -> dict[str, dict[str, str]]:
    """metrics.csv as step -> {column: the value's text} (empty cells left out: a column not logged then)."""
    if not os.path.lexists(path):
        return {}
    text = io.StringIO(_bytes(path).decode("utf-8", errors="replace"), newline="")
    return {row["step"]: {k: v for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(text)}


def _bytes(path: Path) -> bytes:
    """A stored file's bytes from a regular file only: a FIFO in its place is named, never opened to block."""
    return safeyaml.read_bounded(path, None, CorruptFile)


def _summary(stored: dict, here: dict, steps: int | None) -> Iterator[Difference]:
    for key in sorted(stored):
        if not_bits(key):
            continue
        leaves = list(_leaves(stored[key], here.get(key, _ABSENT), f"summary {key}"))
        if not leaves:
            continue
        gaps = [Gap(steps, path, a, b) for path, a, b in leaves if _number(a) and _number(b)]
        gap = max(gaps, key=_rank) if len(gaps) == len(leaves) else None
        yield Difference(steps, f"summary {key}", stored[key], here.get(key, "absent"), gap)


def _arrays(stored: Path, here: Path) -> Iterator[Difference]:
    if not os.path.lexists(stored):
        return
    if not here.exists():
        yield Difference(None, "the file", "written", "not written")
        return
    with np.load(io.BytesIO(_bytes(stored))) as ours, np.load(here) as theirs:
        for key in ours.files:
            if key not in theirs.files:
                yield Difference(None, key, "an array", "absent")
                continue
            a, b = ours[key], theirs[key]
            if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
                gap = _elements(key, a, b) if a.shape == b.shape else None
                yield Difference(None, key, f"{a.dtype} {a.shape}", f"{b.dtype} {b.shape} (other values)", gap)


def _elements(key: str, a: np.ndarray, b: np.ndarray) -> Gap | None:
    """The elements of two arrays of one shape farthest apart, relatively (None: not real numbers)."""
    if a.dtype.kind not in "iuf" or b.dtype.kind not in "iuf":
        return None
    x, y = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.abs(x - y)
        off = ~((x == y) | (np.isnan(x) & np.isnan(y)))
        finite = np.isfinite(gap) & np.isfinite(x) & (x != 0)
        relative = np.where(off, np.where(finite, gap / np.where(finite, np.abs(x), 1.0), np.inf), -1.0)
    at = np.unravel_index(int(np.argmax(relative)), a.shape) if a.ndim else ()
    what = f"{key}[{', '.join(map(str, at))}]" if a.ndim else key
    return Gap(None, what, float(x[at]), float(y[at]))


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


def _leaves(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """The leaves in which two JSON values differ (bit for bit; NaN equals NaN), as (path, a, b): lists
    and mappings of one shape element by element, anything else (another length, other keys, another
    type) as one leaf. None: the values are equal."""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _leaves(x, y, f"{path}[{i}]")
    elif isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for k in a:
            yield from _leaves(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, float) and isinstance(b, float):
        if not (a == b or (math.isnan(a) and math.isnan(b))):
            yield path, a, b
    elif not (type(a) is type(b) and a == b):
        yield path, a, b


def _number(value: Any) -> bool:
    """A JSON number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cells(a: str, b: str) -> bool:
    """Both metrics.csv cells hold numbers."""
    try:
        float(a), float(b)
    except ValueError:
        return False
    return True


def _shown(value: Any) -> str:
    """A value as the line shows it: floats with every digit (the last bits are the point)."""
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."
