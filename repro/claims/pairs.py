"""Provenance per pair (issue 59): which seeds of a verdict rest on arms that ran different code.

A paired margin needs the arms of each seed to have run one version of the code: an effect of the code
that both arms share cancels in the margin, so code that differs *between* seeds is no reason to void a
claim. A seed's arms compare when they ran at one commit, or when one of their commits computes every arm
as it ran: the computation digest (:mod:`repro.store.digest`) of each arm's spec at that commit equals the
arm's own. Arms of different cells execute different code (a window attention is not a fixed one), so
their digests are never compared with each other, only each with itself at the other's commit. A seed
with an arm trained from uncommitted code (``+dirty``: what it ran is recorded nowhere), or with an arm
whose code cannot be read while its arms ran at several versions, is dropped from the verdict, which is
judged on the seeds left (:func:`repro.claims.gates.evaluate`). Arms that all record one version, or
none, compare: a store without git history is judged as one version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from repro.claims.select import seeds_of
from repro.store.digests import of_version
from repro.store.provenance import DIRTY

Computes = Callable[[str, str], "str | None"]  # (run id, commit) -> the digest of that run's spec at that commit


def dropped(runs: pd.DataFrame, used: Iterable[str], computes: Computes | None) -> dict[Any, str]:
    """Seed -> why the arms of that seed among the runs ``used`` do not compare (empty: every seed
    compares, or ``runs`` records no code version)."""
    if "code_version" not in runs:
        return {}
    rows = runs[runs["run_id"].isin(set(used))].drop_duplicates("run_id")
    out = {}
    for seed, arms in rows.groupby(seeds_of(rows), sort=True):
        why = _why(arms, computes)
        if why:
            out[seed] = why
    return out


def _why(arms: pd.DataFrame, computes: Computes | None) -> str:
    versions = {r: _text(v) for r, v in zip(arms["run_id"], arms["code_version"], strict=True)}
    for run, version in versions.items():
        if version.endswith(DIRTY):
            return f"run {run}: {of_version(version)}"
    commits = sorted(set(versions.values()))
    if len(commits) == 1:
        return ""
    own = dict(zip(arms["run_id"], arms["digest"], strict=True)) if "digest" in arms else {}
    unread = [r for r in versions if not _text(own.get(r))]
    if unread:
        return f"its arms ran at {' and '.join(commits)}, and the code of run {unread[0]} cannot be read"
    if computes is not None:
        for commit in commits:
            if all(computes(run, commit) == own[run] for run in versions):
                return ""
    return (
        f"its arms ran different code ({', '.join(f'{r} at {v}' for r, v in versions.items())}): "
        "no one of their commits computes every arm as it ran"
    )


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def notes(drop: dict[Any, str]) -> list[str]:
    """One line per dropped seed, for the verdict's page."""
    return [f"seed {seed} dropped by its provenance: {why}" for seed, why in drop.items()]
