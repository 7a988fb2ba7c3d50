"""How long a plan of runs will take, known before its first step: each run's training steps at the
seconds per step, and its evaluation at the seconds per scored target, that stored finished runs of the
same shape took (a ``--max-steps`` run scores a prefix of each split: its evaluation is counted at that
size).

A run's *shape* is what sets its speed, not its result: the data, the model, the batch, the precision,
the validation during training and the evaluation; not the seed, the learning rate or the number of
steps. Stored runs are looked up under the results root being trained into first (this machine's
timings), then under the default root (``results/``: the shipped runs, timed on the machine that
trained them). A shape stored in neither is not estimated: its run's own progress lines give its ETA
after its first steps (:class:`repro.train.callbacks.ProgressLines`). No torch here.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from repro.progress import duration
from repro.store.runs import CorruptFile, RunDir, results_root

TRAIN_KEYS = ("batch_size", "precision", "val_every", "val_tokens")  # the train keys that set the speed


def shape(resolved: dict) -> str:
    """The shape of a resolved spec (a run's spec.yaml, or :meth:`RunSpec.resolved`) as a comparable key."""
    train = resolved.get("train") or {}
    return json.dumps(
        {
            "data": resolved.get("data"),
            "model": resolved.get("model"),
            "train": {k: train.get(k) for k in TRAIN_KEYS},
            "eval": resolved.get("eval"),
        },
        sort_keys=True,
        default=str,
    )


@dataclass(frozen=True)
class Timing:
    """Of ``n`` stored runs of one shape under ``root``: mean seconds per step, mean evaluation seconds per
    scored target, and the targets a whole evaluation scores (the most any of them scored: a capped run
    scores fewer); ``estimated``: none of them timed its evaluation, which is then their targets at the
    median ratio of the runs that did."""

    per_step: float
    per_target: float
    targets: float
    estimated: bool
    n: int
    root: Path

    def seconds(self, spec, cap: int | None = None) -> float:
        """A run of this shape: its training steps and its evaluation, every target or (``cap``) each
        split's first ``cap``."""
        targets = self.targets if cap is None else min(self.targets, cap * len(spec.eval.splits))
        return self.per_step * spec.train.steps + self.per_target * targets


@dataclass(frozen=True)
class _Run:
    """One stored finished run's timing: its shape, seconds per step, evaluation seconds (None: not
    recorded, an older run), the targets it scored (valid and test), the tokens of a training step and
    its evaluation procedure (streams, windows, sequences: docs/evaluation.md)."""

    shape: str
    per_step: float
    eval_seconds: float | None
    targets: float
    tokens: float
    procedure: str | None


class Timings:
    """The stored finished runs' timings by shape, under the results roots given (the first preferred);
    :meth:`refresh` reads the runs stored since (this session's), each run directory once."""

    def __init__(self, roots: list[Path]):
        self.roots = list(dict.fromkeys(roots))
        self.seen: dict[Path, _Run | None] = {}
        self.refresh()

    def refresh(self) -> None:
        for root in self.roots:
            for summary in sorted(root.glob("runs/*/*/summary.json")):
                if self.seen.get(summary.parent) is None:
                    self.seen[summary.parent] = _timed(RunDir(root, summary.parent.parent.name, summary.parent.name))

    def of(self, resolved: dict) -> Timing | None:
        key = shape(resolved)
        for root in self.roots:
            found = [r for path, r in self.seen.items() if r and r.shape == key and path.is_relative_to(root / "runs")]
            if not found:
                continue
            per_step = statistics.mean(r.per_step for r in found)
            targets = max(r.targets for r in found)
            timed = [r.eval_seconds / r.targets for r in found if r.eval_seconds is not None and r.targets]
            if timed:
                return Timing(per_step, statistics.mean(timed), targets, False, len(found), root)
            per_target = self.eval_ratio(found[0].procedure) * per_step / statistics.mean(r.tokens for r in found)
            return Timing(per_step, per_target, targets, True, len(found), root)
        return None

    def eval_ratio(self, procedure: str | None = None) -> float:
        """The median of evaluation seconds over (evaluation steps x seconds per step) of the runs that
        timed their evaluation with ``procedure`` (all of them where none did), an evaluation step being
        a training step's worth of scored targets (a forward pass of the evaluation's tokens against a
        training step of as many: about a third for streams and whole sequences, 0.8 for windows, which
        read each target's context again; 0 before any run timed one)."""
        timed = [r for r in self.seen.values() if r and r.eval_seconds and r.targets]
        timed = [r for r in timed if r.procedure == procedure] or timed
        ratios = [r.eval_seconds / (r.targets / r.tokens * r.per_step) for r in timed]
        return statistics.median(ratios) if ratios else 0.0


def _timed(run: RunDir) -> _Run | None:
    """A finished run's timing; None: unfinished, untimed, reused from another manifest, or corrupt."""
    try:
        summary = run.summary()
        if summary.get("status") != "finished" or not summary.get("seconds_per_step") or "reused_from" in summary:
            return None
        spec = run.spec()
        tokens = spec["train"]["batch_size"] * spec["data"]["block"]
        targets = sum(float(summary.get(f"{split}_targets") or 0) for split in ("valid", "test"))
        evaluation = summary.get("eval_seconds")
        return _Run(
            shape(spec),
            float(summary["seconds_per_step"]),
            None if evaluation is None else float(evaluation),
            targets,
            float(tokens),
            summary.get("eval_procedure"),
        )
    except (CorruptFile, KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def default_roots(root: Path) -> list[Path]:
    """The root trained into, then the default one (the shipped runs) when it is another."""
    return [root, results_root(None)]


def plan(
    specs: list,
    timings: Timings,
    capped: Collection[str] = (),
    parallel: int = 1,
    elapsed: Mapping[str, float] | None = None,
) -> str:
    """``ETA 52m10s for 9 run(s), from stored runs of the same shape under results/``: their training steps
    at the seconds per step and their evaluation at the seconds per target of those runs (``capped``: the
    ids of runs that score each split's first ``train.val_tokens`` targets only); naming the evaluations
    estimated and the runs of a shape never stored (left out of the sum). ``parallel``: runs trained at
    once (the sum shared among them, said so); ``elapsed``: run id -> seconds a running run has trained
    (taken off its own)."""
    scored = [spec for spec in specs if spec.train.weights is not None]  # released weights: no training
    specs = [spec for spec in specs if spec.train.weights is None]
    if scored:
        told = f"{len(scored)} evaluation(s) of pretrained weights, each timed on its first block before it goes on"
        return told if not specs else f"{plan(specs, timings, capped, parallel, elapsed)}; + {told}"
    seconds, sources, unknown, estimated = 0.0, {}, 0, 0
    for spec in specs:
        timing = timings.of(spec.resolved())
        if timing is None:
            unknown += 1
            continue
        own = timing.seconds(spec, spec.train.val_tokens if spec.run_id in capped else None)
        seconds += max(0.0, own - (elapsed or {}).get(spec.run_id, 0.0))
        estimated += timing.estimated
        sources[timing.root] = sources.get(timing.root, 0) + 1
    if not specs:
        return "nothing to train"
    if not sources:
        return f"ETA unknown: no stored run of the same shape as these {len(specs)}; each run's lines give its ETA after its first steps"
    where = ", ".join(f"{root}/" + (f" ({n})" if len(sources) > 1 else "") for root, n in sources.items())
    at_once = min(parallel, len(specs) - unknown)
    shared = f" ({at_once} at a time)" if at_once > 1 else ""
    text = (
        f"ETA {duration(seconds / at_once)}{shared} for {len(specs) - unknown} run(s), from stored runs of the "
        f"same shape under {where}"
    )
    if estimated:
        text += f" ({estimated} evaluation(s) not timed there: estimated from their size)"
    if unknown:
        text += f"; + {unknown} run(s) of a shape never stored: their lines give their ETA after their first steps"
    return text
