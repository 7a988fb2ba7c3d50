"""``repro retrain RUN... [--at COMMIT]``: stored runs trained again from committed code and put in place of
the stored ones (repro.train.replace), one line per run: its bits before and after.

Exit status: 0 every run retrained and in place; 1 a retraining failed (that run and the ones after it
unchanged); 2 bad input (a run that is not in the store or not finished, uncommitted code without
``--at``, an ``--at`` that is not a commit)."""

from __future__ import annotations

import sys
from pathlib import Path

from repro.cli.common import store_root
from repro.errors import RunFailed, UserError
from repro.registry import Command


def cmd_retrain(args) -> int:
    from repro.replay import verify  # torch
    from repro.train import replace

    root = store_root(args).resolve()  # the retraining runs in the commit's worktree
    runs = [replace.folders(root, ref) for ref in args.runs]  # every name checked before anything trains
    repo = verify.git(Path(replace.__file__).resolve().parent, "rev-parse", "--show-toplevel")
    if not repo:
        raise UserError("this code is in no git repository: a retraining needs the commit it trains at")
    commit = replace.commit_of(args.at, Path(repo))
    with verify.scratch_folder() as scratch:
        try:
            code = verify.worktree(Path(repo), commit, scratch / "code" / commit)
        except verify.CannotVerify as why:
            raise RunFailed(str(why)) from None
        for found in runs:
            print(replace.retrain(found, commit, code, args.access, echo=_stderr), flush=True)
    return 0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def add_arguments(p, parents) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id (or unique prefix) or run directory")
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
