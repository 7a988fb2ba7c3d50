"""Provenance: which code produced a stored result (``code_version`` in every ``spec.yaml`` and W&B config).
What that code computed is the run's computation digest (:mod:`repro.store.digest`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SOURCE = ("repro", "experiments", "analysis")  # what code_version's "+dirty" looks at (docs/reproducibility.md)
DIRTY = "+dirty"


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
