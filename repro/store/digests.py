"""The computation digest of each stored run (:mod:`repro.store.digest`): the one its spec.yaml records
(runs trained since the digest exists), or computed from its ``code_version``'s commit and cached in
``<results>/index/digests.json`` (a cache: lost or unwritable, only time is lost). A run trained from
uncommitted code (``+dirty``) has none: what it ran is recorded nowhere. The cache is written to a temp
file renamed over it, merged with what another process wrote meanwhile, so two writers lose nothing but
a recomputation.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from repro.errors import StoreError
from repro.files import atomic
from repro.store import digest as code
from repro.store.provenance import DIRTY, UNKNOWN, code_version
from repro.store.runs import RunDir

FILE = ("index", "digests.json")
FIRST_FORMAT = "computation-digest 1"  # the format of a summary that names none (stamped before formats were)


class Known(NamedTuple):
    """A run's digest, or None with why it has none."""

    digest: str | None
    why: str = ""
    unread: bool = False  # its commit's code could not be read (no git, not in the history)


def of_version(version: str | None) -> str:
    """Why a run trained at ``version`` can have no digest ("" when it can)."""
    if not version or version == UNKNOWN:
        return "it records no code version"
    if version.endswith(DIRTY):
        return f"it was trained from uncommitted code ({version}): what it ran is not recorded"
    return ""


def stamp(run: RunDir, summary: dict[str, Any]) -> str | None:
    """Record in a run's summary (``summary``: what its finish wrote, not read again) the digest of the
    code it executed, where that is this checkout's committed code (a run trained or scored here now, by
    code with no uncommitted change); its digest, or None (a run of other or uncommitted code: its commit,
    or nothing, says what it ran)."""
    spec = run.spec()
    version = spec.get("code_version")
    if recorded(summary) or of_version(version) or version != code_version():
        return recorded(summary)
    try:
        found = code.digest(spec)
    except (OSError, code.NoHistory):
        return None
    run.update_summary(digest=found, digest_format=code.FORMAT)
    return found


def recorded(summary: Mapping[str, Any] | None) -> str | None:
    """The digest a run's summary records, where it was computed by today's :data:`~repro.store.digest.FORMAT`
    (a summary with none was stamped by the first); None otherwise: its commit says what it ran."""
    summary = summary or {}
    found = summary.get("digest")
    fresh = summary.get("digest_format", FIRST_FORMAT) == code.FORMAT
    return found if isinstance(found, str) and found and fresh else None


class Digests:
    """Digests of the runs of the store at ``root``, from the history of ``repo`` (default: this code's)."""

    def __init__(self, root: Path, repo: Path | None = None):
        self.root, self.repo = Path(root), repo or code.repository()
        self.path = self.root.joinpath(*FILE)
        self.cache = self._load()
        self.new: dict[str, str] = {}

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError, RecursionError):
            return {}
        ok = isinstance(data, dict) and data.get("format") == code.FORMAT and isinstance(data.get("digests"), dict)
        return data["digests"] if ok else {}

    def at(self, spec: dict[str, Any], commit: str) -> Known:
        """The digest of a run of ``spec`` (a stored spec.yaml) at ``commit`` (raises nothing)."""
        why = of_version(commit)
        if why:
            return Known(None, why)
        key = f"{spec.get('manifest')}/{spec.get('run_id')}@{commit}"
        if key in self.cache:
            return Known(self.cache[key])
        try:
            found = code.digest(spec, commit, self.repo)
        except code.NoHistory as e:
            return Known(None, str(e), unread=True)
        self.cache[key] = self.new[key] = found
        return Known(found)

    def own(self, spec: dict[str, Any], summary: Mapping[str, Any] | None = None) -> Known:
        """The digest of the code a stored run executed: the one its ``summary`` records (:func:`recorded`),
        or computed from its commit."""
        version = spec.get("code_version")
        why = of_version(version)
        if why:
            return Known(None, why)
        kept = recorded(summary)
        return Known(kept) if kept else self.at(spec, str(version))

    def today(self, spec: dict[str, Any]) -> str:
        """The digest of what this checkout's code would execute for ``spec``."""
        return code.digest(spec, None, self.repo)

    def stale(self, spec: dict[str, Any], summary: Mapping[str, Any] | None = None) -> Known:
        """Whether a stored run (its spec.yaml, its summary) is stale: ``why`` says how (today's code would
        execute other code for its spec, or what it executed is not known); "" when current."""
        own = self.own(spec, summary)
        if own.digest is None:
            return own
        today = self.today(spec)
        return Known(own.digest, "" if own.digest == today else f"it executed {own.digest}, today's code {today}")

    def save(self) -> None:
        """Write what was computed (merged with the file as it is now); nothing where it cannot be written."""
        if not self.new:
            return
        merged = {**self._load(), **self.new}
        with contextlib.suppress(StoreError, OSError):
            atomic.write_text(self.path, json.dumps({"format": code.FORMAT, "digests": merged}, sort_keys=True))
        self.new = {}
