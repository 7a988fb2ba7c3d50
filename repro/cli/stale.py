"""Stale runs (issue 59): the finished stored runs whose computation digest (:mod:`repro.store.digest`)
differs from what this checkout's code executes for their spec, or is unknown (``+dirty``), as
``repro status --stale`` lists them and ``repro retrain --stale`` trains them again."""

from __future__ import annotations

from pathlib import Path

from repro.errors import UserError
from repro.report.cost import hours
from repro.store import digest as code
from repro.store.digests import Digests
from repro.store.runs import RunDir


def runs(root: Path, rows: list[dict]) -> list[dict]:
    """The finished ``rows`` (status listing rows) that are stale, each with ``stale``: why. A store whose
    runs' commits are in no readable git history is bad input (it cannot be told)."""
    digests = Digests(root)
    out, unread = [], []
    finished = [r for r in rows if r.get("status") == "finished"]
    for row in finished:
        run = RunDir(root, row["manifest"], row["run_id"])
        known = digests.stale(run.spec(), run.summary())
        if known.why:
            out.append({**row, "stale": known.why})
        if known.unread:
            unread.append(known.why)
    digests.save()
    if finished and len(unread) == len(finished):
        raise UserError(f"{unread[0]}: the digest of a stored run is computed from the commit that trained it")
    return out


def summary(rows: list[dict]) -> str:
    """The line under ``repro status --stale``'s table."""
    if not rows:
        return f"no stale run: every finished run executed what today's code executes ({code.FORMAT})"
    manifests = sorted({r["manifest"] for r in rows})
    return (
        f"{len(rows)} stale run(s) in {len(manifests)} manifest(s); retraining them takes about {hours(rows):.1f} "
        "h on the machines that trained them (their stored training + scoring wall times): `repro retrain --stale`"
    )
