"""When a claim's design (:mod:`repro.claims.design`) was registered, and whether a verdict is judged under
it (issue 60). The store records the design's hash with each run trained for it (:func:`stamp`: the
summary's ``designs``, claim id -> hash, written by the session after the run, outside the code the
computation digest hashes). For runs stored before that record, git history says: the design is the
manifest as committed *before* the run first entered the store's history (the parent of the commit that
added its ``summary.json``; the commit itself where the manifest was new there), or, for a run never
committed, the manifest at the commit that trained it. A verdict's registered design is its first run's
(the earliest of its runs to exist); one that differs from today's is **post hoc**: labelled so, with the
parts that changed, never silently re-judged.
"""

from __future__ import annotations

import contextlib
import math
import posixpath
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from repro.claims import design
from repro.config import manifest as manifests
from repro.errors import StoreError, UserError
from repro.files import safeyaml
from repro.store.runs import RunDir

STAMP = "designs"  # the summary key: claim id -> the hash of its design when the run was trained
RUNS = "runs"  # the store's folder of runs under its root


def stamp(run: RunDir, path: Path, scale: str) -> dict[str, str]:
    """Record in a run's summary the hash of each design of its manifest (the file at ``path``) at
    ``scale``, as the manifest is written now; what it recorded (nothing where the file cannot be read)."""
    try:
        hashes = {i: design.digest(d) for i, d in design.of_document(manifests.read(Path(path)), scale).items()}
    except UserError:
        return {}
    if hashes:
        run.update_summary(**{STAMP: hashes})
    return hashes


class First(NamedTuple):
    """The first run of a verdict: when it came to exist, what says so, and the design then."""

    when: float  # seconds since the epoch (inf: known only by its stamp)
    said: str  # "run abc entered the store's history at 1a2b3c4 (2026-11-29)"
    designs: dict[str, dict[str, Any]] | None  # claim id -> design, from git (None: not readable)
    hashes: dict[str, str]  # claim id -> hash, from the run's stamp


def _git(repo: Path | None, *args: str) -> str | None:
    if repo is None:
        return None
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _toplevel(folder: Path) -> Path | None:
    out = _git(folder if folder.is_dir() else folder.parent, "rev-parse", "--show-toplevel")
    return Path(out.strip()) if out else None


class History:
    """What the store under ``root`` and its git history say of when runs came to exist (one ``git log``
    pass), and the manifest documents of past commits (read once each)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.repo = _toplevel(self.root)
        self.added: dict[tuple[str, str], tuple[str, float]] = {}  # (manifest, run id) -> (commit, time)
        self.docs: dict[tuple[str, str], dict | None] = {}
        self.times: dict[str, float] = {}
        if self.repo is None:
            return
        with contextlib.suppress(ValueError, OSError):
            where = self.root.resolve().relative_to(self.repo.resolve()).as_posix()
            log = _git(self.repo, "log", "--diff-filter=A", "--format=@%H %ct", "--name-only", "--", where) or ""
            commit, when = "", math.inf
            for line in log.splitlines():
                if line.startswith("@"):
                    commit, _, ct = line[1:].partition(" ")
                    when = float(ct)
                elif line.endswith("/summary.json"):
                    parts = line.split("/")
                    if len(parts) >= 4 and parts[-4] == RUNS:  # newest first: the oldest addition wins
                        self.added[(parts[-3], parts[-2])] = (commit, when)

    def _time(self, commit: str) -> float:
        if commit not in self.times:
            out = _git(self.repo, "log", "-1", "--format=%ct", commit)
            self.times[commit] = float(out) if out and out.strip().isdigit() else math.inf
        return self.times[commit]

    def document(self, path: Path, commit: str) -> dict | None:
        """The merged document of the manifest file at ``path`` as committed at ``commit`` (its includes
        at that commit too); found by its file name where it lay elsewhere then; None: not there."""
        repo = _toplevel(path)
        if repo is None:
            return None
        key = (str(path.resolve()), commit)
        if key not in self.docs:
            self.docs[key] = self._read(repo, path.resolve().relative_to(repo.resolve()).as_posix(), commit)
        return self.docs[key]

    def _read(self, repo: Path, rel: str, commit: str, depth: int = 0) -> dict | None:
        text = _git(repo, "show", f"{commit}:{rel}")
        if text is None and depth == 0:  # moved since: the file of that name under experiments/ then
            names = (_git(repo, "ls-tree", "-r", "--name-only", commit) or "").splitlines()
            found = [n for n in names if n.endswith(f"/{posixpath.basename(rel)}") and n.startswith("experiments")]
            text = _git(repo, "show", f"{commit}:{found[0]}") if found else None
            rel = found[0] if found else rel
        if text is None or depth > 8:
            return None
        try:
            data = safeyaml.loads(text, f"{commit}:{rel}")
        except safeyaml.YamlError:
            return None
        if not isinstance(data, dict):
            return None
        includes = data.pop("include", [])
        merged: dict = {}
        for ref in [includes] if isinstance(includes, str) else includes if isinstance(includes, list) else []:
            under = self._read(repo, posixpath.normpath(posixpath.join(posixpath.dirname(rel), str(ref))), commit, 1)
            merged = manifests.merge_documents(merged, under or {})
        return manifests.merge_documents(merged, data)

    def first(self, path: Path, name: str, scale: str, run_ids: Iterable[str]) -> First | None:
        """The first of ``run_ids`` (runs of manifest ``name`` at ``path``) to exist, and its design."""
        found = []
        for run_id in sorted(run_ids):
            if (name, run_id) in self.added:
                commit, when = self.added[(name, run_id)]
                day = time.strftime("%Y-%m-%d", time.gmtime(when))
                said = f"its first run, {run_id}, entered the store's history at {commit[:7]} ({day})"
                found.append((when, said, ("parent", commit), {}))
                continue
            try:
                run = RunDir(self.root, name, run_id)
                summary, version = run.summary(), str(run.spec().get("code_version") or "")
            except (StoreError, OSError, ValueError):
                continue
            hashes = summary.get(STAMP) if isinstance(summary.get(STAMP), dict) else {}
            if hashes:
                found.append((math.inf, f"recorded with its first run, {run_id}", None, hashes))
            elif version and version != "unknown":
                commit = version.removesuffix("+dirty")
                found.append(
                    (self._time(commit), f"its first run, {run_id}, was trained at {version}", ("at", commit), {})
                )
        if not found:
            return None
        when, said, where, hashes = min(found, key=lambda f: f[0])
        designs = None
        if where is not None:
            how, commit = where
            doc = self.document(path, f"{commit}^") if how == "parent" else None
            doc = doc if doc is not None else self.document(path, commit)
            designs = design.of_document(doc, scale) if doc is not None else None
        return First(when, said, designs, hashes)


def post_hoc(today: dict[str, Any], claim_id: str, first: First | None) -> str:
    """The label of a verdict whose design (``today``) differs from the one its first run registered
    ("" where it is the same, or where neither the store nor git history tells)."""
    if first is None:
        return ""
    now = design.digest(today)
    if first.hashes:
        then = first.hashes.get(claim_id)
        if then == now:
            return ""
        what = "it was not a claim then" if then is None else f"its design's hash was {then}, now {now}"
        return f"*post hoc*: its design changed after its runs existed ({what}; {first.said})"
    if first.designs is None:
        return ""
    before = first.designs.get(claim_id)
    if before is None:
        return f"*post hoc*: written after its runs existed ({first.said})"
    parts = design.changed(before, today)
    if not parts:
        return ""
    values = [f"{p} {_shown(before.get(p))} -> {_shown(today.get(p))}" for p in parts if p in VALUED]
    return f"*post hoc*: its {', '.join(parts)} changed after its runs existed ({'; '.join([*values, first.said])})"


VALUED = ("sesoi", "split", "looks", "family")  # the parts a label shows before -> after (the checks: by name)


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) if len(value) < 4 else f"{value[0]} to {value[-1]}"
    return "none" if value is None else str(value)
