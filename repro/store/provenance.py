"""Provenance: which code produced a stored result (``code_version`` in every ``spec.yaml`` and W&B config)."""

from __future__ import annotations

import subprocess
from pathlib import Path

SOURCE = ("repro", "experiments", "analysis")  # what code_version's "+dirty" looks at (docs/reproducibility.md)


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
        ).stdout.strip()
        return rev.stdout.strip() + ("+dirty" if dirty else "") if rev.returncode == 0 else "unknown"
    except OSError:
        return "unknown"
