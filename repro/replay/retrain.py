"""``repro retrain RUN... [--at COMMIT]``: a stored run trained again from committed code and put in place of
the stored one, so that no verdict rests on a run whose code is not in the repository (``+dirty``) or
whose code differs in bits from the runs it is compared with (their computation digests, :mod:`repro.store.digest`).

The run is its stored spec, whatever its manifest says today: the spec's sections are written as a
one-run manifest (its name, its scale) and trained by the commit's own ``repro run`` in a child process,
in a git worktree of the commit (as ``repro verify`` re-executes a run), with the threads its spec pins
and the instruction set it recorded, into the scratch results root ``<results>/.retrain/replace/<run_id>``.
The scratch run is kept until it is in place, so a retraining that was interrupted resumes from its
checkpoint: SIGTERM, SIGINT or SIGHUP is passed on to the child, which checkpoints and exits, and the
command says where the run is kept (exit 143, 130, 129); a ``kill -9`` kills the child with it
(:mod:`repro.replay.children`). Only a finished run of the same id (the same spec) is put in place: under
the stored run's lock a new folder is assembled beside it (the retrained files, the stored grid cell and manifest, and
``replaces``: the code version and bits it replaces) and swapped in by two renames, and the old folder
is removed. A run's copies under other manifests (reused, the same id) are replaced with it. A retraining
that fails leaves every stored file as it was; a kill between the two renames leaves the run's files in
the hidden ``.<run_id>.old-*`` folder beside it, never a folder that mixes the two.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from repro.config.access import NONE, Access
from repro.config.spec import RunSpec
from repro.errors import RunFailed, UserError
from repro.files import atomic
from repro.identity import SECTIONS
from repro.replay import children, verify
from repro.store.provenance import DIRTY, checkout, code_version
from repro.store.runs import RunDir, refresh_index

SCRATCH = (".retrain", "replace")
COPIED = ("metrics.csv", "analysis.npz")  # beside spec.yaml and summary.json, which are rewritten


def repository() -> Path:
    """The git checkout of this code: the repository whose top-level is the code's own folder (the one
    holding the ``repro`` package). A copy of the code lying inside another repository is none: that
    repository's commits are not this code's (:func:`repro.store.provenance.checkout`, whose rule
    ``code_version`` follows too)."""
    here = checkout()
    if here.top is None:
        raise UserError("this code is in no git repository: a retraining needs the commit it trains at")
    if not here.own:
        raise UserError(
            f"this code's folder {here.root} lies inside the git repository {here.top}, which is not its checkout: "
            f"expected {here.root} to be the top of the code's own git checkout, whose commit a retraining trains at"
        )
    return here.root


def commit_of(at: str | None, repo: Path) -> str:
    """``--at``'s commit as a short hash (default: this code's commit, which must hold no uncommitted change)."""
    if at is not None and not at.strip():
        raise UserError(f"--at {at!r}: expected a commit (a hash, tag or branch); an empty one names none")
    version = at or code_version()
    if version.endswith(DIRTY):
        raise UserError(
            f"this checkout's code is uncommitted (code_version {version}): commit it, or name a commit with --at"
        )
    short = verify.git(repo, "rev-parse", "--short", f"{version}^{{commit}}")
    if not short:
        raise UserError(f"--at {version}: not a commit of the repository at {repo}")
    return short


def folders(root: Path, ref: str) -> list[RunDir]:
    """The stored folders of the run ``ref`` names (its id, a unique prefix of it, or a run folder): the run
    first, then its copies under other manifests (the same id, reused)."""
    path = Path(ref)
    if (path / "spec.yaml").exists():
        root, ref = path.parent.parent.parent, path.name
    ids = sorted({p.parent.name for p in root.glob(f"runs/*/{ref}*/spec.yaml")})
    if len(ids) != 1:
        raise UserError(f"run {ref!r} matches {len(ids)} stored run ids under {root}/runs; give a longer id or a path")
    found = [RunDir(root, p.parent.parent.name, ids[0]) for p in sorted(root.glob(f"runs/*/{ids[0]}/spec.yaml"))]
    for run in found:
        if not run.finished:
            raise UserError(
                f"run {run.path}: not finished (or corrupt): `repro run` trains it, `repro status` says why"
            )
    return sorted(found, key=lambda run: "reused_from" in run.summary())


def retrain(
    runs: list[RunDir], commit: str, code: Path, access: Access = NONE, echo: Callable[[str], None] = print
) -> str:
    """Train ``runs``' run again with the code of ``commit`` (its worktree ``code``) and put it in place of
    every folder of ``runs``; the line that says what moved."""
    first = runs[0]
    spec, summary = first.spec(), first.summary()
    root = first.path.parent.parent.parent
    scratch = root.joinpath(*SCRATCH, first.run_id)
    echo(f"retraining {first.run_id} ({first.path.parent.name}) at {commit} under {scratch}")
    isa = "avx2" if (summary.get("environment") or {}).get("cpu_isa") == "avx2" else "native"
    trained = _train(first.path.parent.name, first.run_id, spec, isa, code, scratch, access)
    new = trained.summary()
    replaces = {key: summary.get(key) for key in ("valid_bits", "test_bits")}
    replaces["code_version"] = spec.get("code_version")
    for run in runs:
        _install(run, trained, {"replaces": replaces})
        refresh_index(root, run.path.parent.name)
    shutil.rmtree(scratch)
    moved = ", ".join(
        f"{key.split('_')[0]} {_bits(replaces[key])} -> {_bits(new.get(key))}" for key in replaces if "bits" in key
    )
    names = ", ".join(run.path.parent.name for run in runs)
    return f"{first.run_id}  {names}  retrained at {commit}: {moved} (replaces {replaces['code_version']})"


def _bits(value) -> str:
    return "none" if value is None else f"{value:.6f}"


def train_missing(root: Path, spec: RunSpec, commit: str, code: Path, access: Access = NONE, echo=print) -> str:
    """Train ``spec``'s run, which the store lacks, with the code of ``commit`` (its worktree ``code``), as a
    run of its manifest's cell, and store it; the line that says so. ``commit``'s code must give the run the
    id this checkout gives it (else its spec schema differs: nothing is stored, say why). The finished run
    is staged beside the scratch run and renamed into place, so a kill leaves no half-written run; a run
    that appeared meanwhile (another job trained it) is left alone."""
    run = RunDir(root, spec.manifest, spec.run_id)
    scratch = root.joinpath(*SCRATCH, spec.run_id)
    echo(f"training {spec.run_id} ({spec.manifest}, {spec.cell_name}) at {commit} under {scratch}")
    trained = _train(spec.manifest, spec.run_id, spec.record(None), "native", code, scratch, access)
    staged = _stage(
        trained, {**trained.spec(), "cell": spec.cell}, {**trained.summary(), "cell": spec.cell, "trained_at": commit}
    )
    atomic.make_dirs(run.path.parent)
    try:
        os.rename(staged.path, run.path)  # refused when the run's folder exists and holds anything
    except OSError:
        raise RunFailed(
            f"run {spec.run_id}: {run.path} appeared while it trained (another job?); left it alone, the "
            f"retraining stays under {scratch}"
        ) from None
    atomic.fsync_dir(run.path.parent)
    refresh_index(root, spec.manifest)
    shutil.rmtree(scratch)
    new = RunDir(root, spec.manifest, spec.run_id).summary()
    return (
        f"{spec.run_id}  {spec.manifest}  {spec.cell_name}  trained at {commit}: valid {_bits(new.get('valid_bits'))}, "
        f"test {_bits(new.get('test_bits'))} (new)"
    )


def _train(manifest: str, run_id: str, spec: dict, isa: str, code: Path, scratch: Path, access: Access) -> RunDir:
    """The run ``run_id`` of ``spec`` (a stored spec.yaml, or a new run's record) trained by the code in
    ``code`` under the results root ``scratch``: the spec as a one-run manifest, selected by id where that
    code's ``repro run`` can (code without ``--run-id`` trains the one run), on the instruction set ``isa``."""
    atomic.make_dirs(scratch)
    scratch = scratch.resolve()  # the child runs in the commit's worktree: the paths it is given are absolute
    document = {
        "name": manifest,
        "title": f"run {run_id} as stored, retrained",
        "paper": "suite",
        "renders": [],
        "base": {section: spec.get(section) for section in SECTIONS},
        "scales": {spec.get("scale", "tiny"): {}},
    }
    path = scratch / f"{manifest}.yaml"
    atomic.write_text(path, yaml.safe_dump(document, sort_keys=False))
    parser = verify.parser_text(code)
    selection = ["--run-id", run_id] if '"--run-id"' in parser else []
    selection += ["--seeds", "1"] if '"--seeds"' in parser else []
    command = [sys.executable, "-m", "repro", "--results", str(scratch), "run", str(path)]
    command += ["--scale", str(spec.get("scale", "tiny")), "--no-wandb", *selection]
    threads = (spec.get("train") or {}).get("threads") or verify.DEFAULT_THREADS
    kept = f"the retraining of run {run_id} is kept under {scratch}; run the same command again to resume"
    with (scratch / "retrain.log").open("a") as log:
        status = children.run(command, code, verify.child_environment(code, threads, isa, access), log, kept)
    trained = RunDir(scratch, manifest, run_id)
    if status != 0 or not trained.finished:
        said = verify.last_line((scratch / "retrain.log").read_text(errors="replace"))
        if (status == 0 and not trained.path.exists()) or f"--run-id {run_id}: no run" in said:
            said = f"the code of that commit gives this spec another run id: its spec schema differs ({said})"
        raise RunFailed(
            f"run {run_id}: its retraining exited {status} without a finished run ({said}); the stored "
            f"run is unchanged, the retraining stays under {scratch}"
        )
    return trained


def _install(run: RunDir, trained: RunDir, extra: dict) -> None:
    """Put the finished ``trained`` run in place of the stored ``run`` (the same id), keeping the stored
    manifest, scale, grid cell and a copy's ``reused_from``, adding ``extra`` to its summary; under the run's lock.
    The new folder is staged under the scratch root (the same file system), then swapped in."""
    with run.lock() as lock:
        if not lock.held:
            raise RunFailed(f"run {run.run_id}: {lock.holder} holds it; nothing replaced, try again when it is done")
        stored_spec, stored_summary = run.spec(), run.summary()
        kept = {
            key: stored_summary[key] for key in ("manifest", "scale", "cell", "reused_from") if key in stored_summary
        }
        keys = ("manifest", "scale", "cell")
        staged = _stage(
            trained,
            {**trained.spec(), **{key: stored_spec.get(key) for key in keys}},
            {**trained.summary(), **kept, **extra},
        )
        old = atomic.temp_dir(run.path, "old")
        os.rename(run.path, old)  # onto the empty folder temp_dir made
        os.rename(staged.path, run.path)
        atomic.fsync_dir(run.path.parent)
    shutil.rmtree(old)


def _stage(trained: RunDir, spec: dict, summary: dict) -> RunDir:
    """The finished ``trained`` run's files, with ``spec`` and ``summary`` as its spec.yaml and summary.json,
    assembled in a folder beside it under its scratch root (the same file system as the store, so a rename
    puts it in place); its checkpoint hard-linked, not copied."""
    staged = RunDir(trained.path.parent.parent.parent / "staged", trained.path.parent.name, trained.run_id)
    shutil.rmtree(staged.path, ignore_errors=True)
    atomic.make_dirs(staged.path)
    for name in COPIED:
        if (trained.path / name).exists():
            atomic.write_bytes(staged.path / name, (trained.path / name).read_bytes())
    if trained.last_checkpoint is not None:
        atomic.make_dirs(staged.checkpoints)
        os.link(trained.last_checkpoint, staged.checkpoints / "last.ckpt")
    staged.write_spec(spec)
    staged.write_summary(summary)
    return staged
