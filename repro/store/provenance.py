"""Provenance: which code produced a stored result (``code_version`` in every ``spec.yaml`` and W&B config).
What that code computed is the run's computation digest (:mod:`repro.store.digest`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NamedTuple

SOURCE = ("repro", "experiments", "analysis")  # what code_version's "+dirty" looks at (docs/reproducibility.md)
DIRTY = "+dirty"
UNKNOWN = "unknown"  # the code_version of code whose commit is not known (of_version: no code version)


class Checkout(NamedTuple):
    """The folder holding the ``repro`` package (``root``) and the top-level folder of the git repository
    it lies in (``top``; None: in none)."""

    root: Path
    top: Path | None

    @property
    def own(self) -> bool:
        """Whether ``root`` is the code's own git checkout: a copy of the code (without its ``.git``) lying
        inside another repository is not, and that repository's commits are not this code's."""
        return self.top == self.root


def checkout() -> Checkout:
    """This code's folder and its git top-level: the one rule by which ``code_version`` and ``repro retrain``
    tell whose commit the code is."""
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True)
    except OSError:  # no git
        return Checkout(root, None)
    top = done.stdout.strip() if done.returncode == 0 else ""
    return Checkout(root, Path(top).resolve() if top else None)


def code_version() -> str:
    """The commit of the code, + ``+dirty`` when a tracked source file (the package, its analysis code, the
    manifests) differs from it; stored results, reports and docs do not make the code dirty. ``unknown``
    for code that is not its own git checkout (:meth:`Checkout.own`): outside any repository, or a copy
    lying inside another one, whose commit it would otherwise record."""
    here = checkout()
    if not here.own:
        return UNKNOWN
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here.root, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *(f":/{p}" for p in SOURCE)],
            cwd=here.root,
            capture_output=True,
            text=True,
            # no index refresh, so no index.lock in the user's checkout: one that a full disk (a file-size
            # limit) cut short was left behind and stopped the user's next git command
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        ).stdout.strip()
        return rev.stdout.strip() + (DIRTY if dirty else "") if rev.returncode == 0 else UNKNOWN
    except OSError:
        return UNKNOWN
