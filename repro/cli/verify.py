"""``repro verify RUN...``: stored runs re-executed as they were made, one line per run (repro.replay.verify).

Exit status: 0 every run gave its stored bits (or, under ``--tolerance X``, numbers within a relative X
of them); 1 a run differs or cannot be verified; 2 bad input (a run that is not in the store, a
``--tolerance`` that is not a relative difference); 143, 130, 129 a SIGTERM, SIGINT, SIGHUP (passed on to
the training child: :mod:`repro.replay.children`), the scratch folder removed."""

from __future__ import annotations

import argparse
import math
import sys

from repro.cli.common import store_root
from repro.registry import Command
from repro.store.runs import find_run
from repro.train import signals


def tolerance(text: str) -> float:
    """``repro verify --tolerance``: a relative difference, a finite number greater than 0 and below 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: expected a number") from None
    if not (math.isfinite(value) and 0 < value < 1):
        raise argparse.ArgumentTypeError(
            f"{text}: allowed: a relative difference greater than 0 and less than 1, e.g. 1e-6 "
            "(without --tolerance the numbers are compared bit for bit)"
        )
    return value


def cmd_verify(args) -> int:
    from repro.replay import verify  # torch

    signals.install()  # SIGTERM, SIGINT, SIGHUP: passed on to a training child, then one line, exit 143, 130, 129
    root = store_root(args)
    runs = [find_run(root, ref) for ref in args.runs]  # every name checked before anything trains (as `repro sample`)
    same = True
    with verify.scratch_folder(keep=args.keep) as scratch:
        if args.keep:
            print(f"scratch folder (kept): {scratch}", file=sys.stderr)
        for run in runs:
            verdict = verify.verify(
                run,
                scratch,
                echo=lambda line: print(line, file=sys.stderr, flush=True),
                access=args.access,
                tolerance=args.tolerance,
            )
            print(verdict, flush=True)
            same = same and verdict.same is True
    return 0 if same else 1


def add_arguments(p, parents) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id (or unique prefix) or run directory")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder (the code and the re-executed runs)")
    p.add_argument(
        "--tolerance",
        type=tolerance,
        default=None,
        metavar="X",
        help="pass a run whose every number is within a relative X of the stored one (|stored - here| <= "
        "X |stored|; a stored 0 must be matched exactly), e.g. 1e-6; the line names the largest difference "
        "(default: bit for bit)",
    )


COMMAND = Command(
    "verify",
    "train stored runs again as they were made (their commit, threads, instruction set) and compare every "
    "stored number bit for bit (or within --tolerance), naming what of the environment differs",
    add_arguments,
    cmd_verify,
)
