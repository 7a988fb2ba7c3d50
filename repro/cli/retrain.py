"""``repro retrain REF... [--at COMMIT]``, ``repro retrain --stale [NAME...]``: runs trained again from committed
code, one line per run. ``--stale``: the runs ``repro status --stale`` lists (repro.cli.stale).

A REF that names stored runs (a run id, a unique prefix of one, a run directory) is trained again and put in
place of the stored run (repro.replay.retrain), its bits before and after said. A REF that names a manifest
(or a group) brings its runs at ``--scale`` (``--seeds``, ``--only``) to the commit: a run whose code could
give other bits than the commit's (its computation digest, :mod:`repro.store.digest`, differs from the one its
spec has at the commit) is trained again, a run the
store lacks is trained at the commit and stored, a run already at the commit is kept. So the arms of a
claim can all be made at one commit, the one most of them were trained at, while the checkout moves on.

Exit status: 0 every run retrained and in place; 1 a retraining failed (that run and the ones after it
unchanged); 2 bad input (a run that is not in the store or not finished, uncommitted code without
``--at``, an ``--at`` that is not a commit, a manifest without the scale)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from repro.cli import options, stale
from repro.cli.common import store_root
from repro.config import lookup
from repro.config.cells import cell_text
from repro.errors import RunFailed, UserError
from repro.plan import filters
from repro.plan.selection import at_scale, stored
from repro.registry import Command
from repro.store.digests import Digests
from repro.store.runs import RunDir, listing
from repro.train import signals


def cmd_retrain(args) -> int:
    from repro.replay import retrain, verify  # torch

    signals.install()  # SIGTERM, SIGINT, SIGHUP: passed on to a training child, then one line, exit 143, 130, 129
    root = store_root(args).resolve()  # the retraining runs in the commit's worktree
    repo = retrain.repository()
    commit = retrain.commit_of(args.at, repo)
    if not args.runs and not args.stale:
        raise UserError(
            "retrain what: name runs or manifests (REF), or give --stale (the runs today's code would not repeat)"
        )
    digests = Digests(root)
    if not args.stale:
        args.scale = args.scale or options.DEFAULT_SCALE
    if args.stale:
        steps = [("retrain", retrain.folders(root, row["run_id"])) for row in _stale(root, args)]
        if not steps:
            at = f" at scale {args.scale}" if args.scale else ""
            print(f"no stale run{at}: every finished run executed what today's code executes", flush=True)
    else:
        steps = [step for ref in args.runs for step in _steps(root, ref, commit, args, digests)]  # all checked first
    digests.save()
    if args.dry_run or not any(what != "keep" for what, _ in steps):
        for what, target in steps:
            print(_planned(what, target, commit), flush=True)
        return 0
    with verify.scratch_folder() as scratch:
        try:
            code = verify.worktree(repo, commit, scratch / "code" / commit)
        except verify.CannotVerify as why:
            raise RunFailed(str(why)) from None
        for what, target in steps:
            if what == "retrain":
                print(retrain.retrain(target, commit, code, args.access, echo=_stderr), flush=True)
            elif what == "train":
                print(retrain.train_missing(root, target, commit, code, args.access, echo=_stderr), flush=True)
            else:
                print(_planned(what, target, commit), flush=True)
    return 0


def _stale(root: Path, args) -> list[dict]:
    """The stale runs of the manifests ``args.runs`` names (none: of the whole store), as `status --stale`."""
    found = [
        m.name for ref in args.runs for m in lookup.with_parts(lookup.select(ref, [], stored(root), args.access), [])
    ]
    rows = [row for name in (found or [None]) for row, _ in listing(root, name)[0]]
    if args.scale is not None:  # given: that scale's runs only (a cpu run costs hours where tiny's cost minutes)
        rows = [row for row in rows if row.get("scale") == args.scale]
    return stale.runs(root, rows)


def _steps(root: Path, ref: str, commit: str, args, digests: Digests) -> list[tuple[str, object]]:
    """What ``ref`` asks of the store: ``("retrain", folders)`` for a stored run (named, or a manifest's run
    whose code could differ from ``commit``'s), ``("train", spec)`` for a manifest's run the store lacks,
    ``("keep", folder)`` for one already at ``commit``."""
    from repro.replay import retrain  # torch

    if _names_runs(root, ref):
        return [("retrain", retrain.folders(root, ref))]
    found = at_scale(lookup.with_parts(lookup.select(ref, [], stored(root), args.access), []), args.scale)
    steps = []
    for m in [m for m in found if m.base is not None]:
        for spec in filters.select(m.expand(args.scale, seeds=args.seeds), args.only):
            run = RunDir(root, m.name, spec.run_id)
            if not run.path.exists():
                steps.append(("train", spec))
                continue
            if not run.finished:
                raise UserError(
                    f"run {run.path}: not finished (or corrupt): `repro run` finishes it, `repro status` says why"
                )
            spec_record = run.spec()
            own = digests.own(spec_record, run.summary()).digest
            differ = own is None or own != digests.at(spec_record, commit).digest
            steps.append(("retrain", retrain.folders(root, spec.run_id)) if differ else ("keep", run))
    return steps


def _names_runs(root: Path, ref: str) -> bool:
    """Whether ``ref`` names runs (a run directory, or 4 to 12 hex digits: a run id or its start), else a
    manifest."""
    return (Path(ref) / "spec.yaml").exists() or bool(re.fullmatch(r"[0-9a-f]{4,12}", ref))


def _planned(what: str, target, commit: str) -> str:
    """One step in words, for ``--dry-run`` and for the runs kept."""
    if what == "train":
        cell = cell_text(target.cell) or "-"
        return f"{target.run_id}  {target.manifest}  {cell}  seed {target.train.seed}: train at {commit} (not stored)"
    run = target[0] if what == "retrain" else target
    spec = run.spec()
    where = f"{run.path.parent.name}  {cell_text(spec.get('cell') or {}) or '-'}  seed {spec['train'].get('seed')}"
    if what == "retrain":
        return f"{run.run_id}  {where}: retrain at {commit} (trained at {spec.get('code_version')})"
    version = spec.get("code_version")
    same = "" if version == commit else f", the same code as {commit}"
    return f"{run.run_id}  {where}: kept (trained at {version}{same})"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def add_arguments(p, parents) -> None:
    p.add_argument(
        "runs",
        nargs="*",
        metavar="REF",
        help="a run id (or unique prefix) or run directory; or a manifest (or group): its runs at --scale, "
        "each trained again where its code could differ from the commit's, trained where the store lacks it",
    )
    p.add_argument(
        "--scale",
        default=None,
        help=f"{options.SCALE_HELP}; with --stale, only that scale's stale runs (without --scale: every scale's)",
    )
    options.seeds_arg(p, "bring")
    options.only_arg(p, "a manifest's runs")
    p.add_argument(
        "--stale",
        action="store_true",
        help="the finished runs of the REF manifests (default: every stored run) whose computation digest "
        "differs from what today's code executes for their spec, or is unknown (`repro status --stale`)",
    )
    p.add_argument("--dry-run", action="store_true", help="say what each run would get; train nothing")
    p.add_argument(
        "--at",
        default=None,
        metavar="COMMIT",
        help="the commit to train at (default: this checkout's, which must hold no uncommitted change); e.g. "
        "the commit of the runs it is compared with",
    )


COMMAND = Command(
    "retrain",
    "train stored runs again from committed code (their spec as stored, in a worktree of the commit) and put "
    "them in place of the stored ones, saying their bits before and after",
    add_arguments,
    cmd_retrain,
)
