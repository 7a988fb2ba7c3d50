"""Provenance: which code produced a stored result (``code_version`` in every ``spec.yaml`` and W&B config),
and whether the code of two stored runs could give different bits (:func:`could_differ`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NamedTuple

SOURCE = ("repro", "experiments", "analysis")  # what code_version's "+dirty" looks at (docs/reproducibility.md)
DIRTY = "+dirty"

# What of the package cannot change a run's numbers (its trained weights, its scores): the code that
# reports, prints, tracks, benchmarks, re-executes or names runs. Everything else under repro/ counts: the
# models, the data (corpora, splits, batching), the training step, optimiser, schedule and clipping, the
# evaluation, the environment a run pins, the spec schema and its defaults, the store's resume. Listed by
# exclusion, so that code moved between files over the history (the package was flat once) still counts.
# A manifest's change is no code change: it changes the spec, so the run id.
NOT_NUMBERS = (
    "repro/report",  # reports and verdicts
    "repro/cli",  # the command line
    "repro/plan",  # which runs a command trains and their ETA (was repro/cli: the run ids say the rest)
    "repro/session",  # a plan's runs handed to the trainer or a launcher, one after another (was repro/cli)
    "repro/track",  # W&B, trackio
    "repro/bench",  # benchmarks
    "repro/config/claims.py",  # the claim language, before it became repro/claims/
    "repro/claims",  # the claim language and its judge
    "repro/config/claim_checks.py",
    "repro/config/renders.py",  # which renderers a manifest names
    "repro/data/cli.py",  # `repro data`
    "repro/train/verify.py",  # re-execution of stored runs
    "repro/train/compare.py",
    "repro/train/retrain.py",
    "repro/train/launch.py",  # job submission
    "repro/train/sampling.py",  # generation from a trained run
    "repro/train/trained.py",
    "repro/replay/verify.py",  # the same, since they left repro/train (repro/replay/samebits.py stays counted,
    "repro/replay/compare.py",  # as repro/train/samebits.py was)
    "repro/replay/retrain.py",
    "repro/sample/sampling.py",
    "repro/sample/trained.py",
    "repro/store/index.py",  # a cache of what a scan read
    "repro/store/provenance.py",
    "repro/console.py",
    "repro/progress.py",
)


def code_version() -> str:
    """The commit of the code, + ``+dirty`` when a tracked source file (the package, its analysis code, the
    manifests) differs from it; stored results, reports and docs do not make the code dirty."""
    try:
        here = Path(__file__).resolve().parent
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *(f":/{p}" for p in SOURCE)],
            cwd=here,
            capture_output=True,
            text=True,
            # no index refresh, so no index.lock in the user's checkout: one that a full disk (a file-size
            # limit) cut short was left behind and stopped the user's next git command
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        ).stdout.strip()
        return rev.stdout.strip() + (DIRTY if dirty else "") if rev.returncode == 0 else "unknown"
    except OSError:
        return "unknown"


class Bits(NamedTuple):
    """Whether two code versions could give a run different bits: ``differ`` True (they could), False (the
    code that decides the numbers is the same), None (unknown, which counts as could differ); ``reason``
    in one line."""

    differ: bool | None
    reason: str

    @property
    def could_differ(self) -> bool:
        return self.differ is not False


def could_differ(a: str | None, b: str | None, repo: Path | None = None) -> Bits:
    """Whether code versions ``a`` and ``b`` (two stored runs' ``code_version``) could train or score one
    spec to different bits: uncommitted code (``+dirty``) could; the same commit cannot; two commits
    cannot when ``git diff`` finds no change between them outside :data:`NOT_NUMBERS`. A version that is
    missing, ``unknown``, not a commit of ``repo`` (default: this code's repository), or no git: unknown."""
    for version in (a, b):
        if not version or version == "unknown":
            return Bits(None, f"a run records no code version ({version or 'none'})")
        if version.endswith(DIRTY):
            return Bits(True, f"{version} is uncommitted code: what it ran is not in the repository")
    if a == b:
        return Bits(False, f"the same commit {a}")
    where = repo or Path(__file__).resolve().parent
    for version in (a, b):
        if _git(where, "rev-parse", "--verify", "--quiet", f"{version}^{{commit}}")[0] != 0:
            return Bits(None, f"commit {version} is not in the repository at {where}")
    paths = [":(top)repro", *(f":(top,exclude){p}" for p in NOT_NUMBERS)]
    code, names = _git(where, "diff", "--name-only", a, b, "--", *paths)
    if code != 0:
        return Bits(None, f"git diff {a} {b} failed")
    changed = names.split()
    if not changed:
        return Bits(False, f"{a} and {b} differ in no code that decides a run's numbers")
    more = f" and {len(changed) - 2} more file(s)" if len(changed) > 2 else ""
    return Bits(True, f"{a} and {b} differ in {', '.join(changed[:2])}{more}")


def _git(where: Path, *args: str) -> tuple[int, str]:
    """``git`` run in ``where``: its exit status and output (127: no git)."""
    try:
        done = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True)
    except OSError:
        return 127, ""
    return done.returncode, done.stdout.strip()
