"""``repro``'s command line (after :func:`repro.cli.main`'s checks): parse, run the command, map errors
to exit statuses.

Exit status: 0 done; 1 a run failed (RunFailed, one line), a write failed (StoreError, one line), or
standard output is closed or full; 2 bad input (UserError, one line; a working directory that no longer
exists too); 3 a run was skipped because another process trains it; 128 + N stopped by signal N (130:
Ctrl-C, each command saying what it leaves; ``repro run``: 143 SIGTERM, 130 SIGINT, 129 SIGHUP, after
checkpointing at a step boundary).
"""

from __future__ import annotations

import sys

from repro.cli.common import access
from repro.cli.parser import build_parser
from repro.config import overrides
from repro.errors import UserError
from repro.session import exits
from repro.store.runs import results_root


def main(argv: list[str] | None = None) -> int:
    return exits.process(lambda stdout: _command(argv, stdout))


def _command(argv: list[str] | None, stdout: exits.Watched) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except UserError as err:  # an option's value refused by its type (repro.cli.options)
        print(f"error: {err}", file=sys.stderr)
        return 2
    if extra:  # overrides after the options (`run NAME --scale tiny key=value`) land here
        if not hasattr(args, "overrides") or not all(overrides.is_override(a) for a in extra):
            parser.error(f"unrecognized arguments: {' '.join(a for a in extra if not overrides.is_override(a))}")
        args.overrides += extra
    if not getattr(args, "func", None):
        parser.print_help()
        return 2

    def call() -> int:
        args.access = access(args)
        results_root(getattr(args, "results", None))  # one that is not a folder: refused by every command
        return args.func(args) or 0

    return exits.statuses(call, stdout, interrupted=getattr(args, "interrupted", exits.INTERRUPTED))


if __name__ == "__main__":
    sys.exit(main())
