"""How fast the read-only commands answer: `repro list`, `validate`, `show` and `status`, each a fresh
``python -m repro`` as a user's shell starts it, interleaved round by round, with the machine's load.

They import neither torch nor Lightning (tests/spine/test_spine_analysis.py checks the imports; this
measures the seconds), so on an idle 2-core machine each answers in well under a second. A record per
command: the median and fastest wall seconds over the rounds, and whether the machine was idle
(:class:`repro.bench.common.Load`): a record from a shared machine says so and is no figure to quote.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from repro.bench import common

COMMANDS = {  # what a user types after `repro`, against the store the bench is given
    "list": ["list"],
    "validate": ["validate"],
    "show": ["show", "as-table1"],
    "status": ["status", "as-table1"],
}
COLUMNS = ["command", "seconds", "fastest", "rounds", "idle", "load_average_before"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds (each command once a round)")
    parser.add_argument("--commands", type=common.csv_of(str), default=list(COMMANDS), help=f"of {', '.join(COMMANDS)}")


def _command(argv: list[str], root: str):
    cmd = [sys.executable, "-m", "repro", "--results", root, *argv]

    def call() -> None:
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise RuntimeError((done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1])

    return call


def main(args: argparse.Namespace) -> list[dict]:
    from repro.store.runs import results_root

    unknown = [c for c in args.commands if c not in COMMANDS]
    if unknown:
        from repro.errors import UserError

        raise UserError(f"--commands: unknown {', '.join(unknown)}; known: {', '.join(COMMANDS)}")
    root = str(results_root(args.results))
    errors: dict[str, str] = {}
    fns = {name: _command(COMMANDS[name], root) for name in args.commands}
    load = common.Load()
    load.mark()
    times = common.interleaved(fns, args.repeats, errors=errors, after_round=load.mark)
    load.timed = 1  # the first mark after the warm-up round starts the timed ones
    machine = load.summary()
    records = []
    for name in args.commands:
        rec = {"command": f"repro {' '.join(COMMANDS[name])}", "timing": "interleaved, a fresh process each"}
        if name in times:
            rec.update(seconds=common.median(times[name]), fastest=min(times[name]), rounds=len(times[name]))
        else:
            rec["error"] = errors.get(name, "failed")
        records.append({**rec, **machine})
    return records
