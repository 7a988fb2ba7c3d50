"""``repro``'s entry point: parse, run the command, map errors to exit statuses.

Exit status: 0 done; 1 a run failed, or a write failed (StoreError, one line); 2 bad input (UserError,
one line); 3 a run was skipped because another process trains it; 128 + N stopped by signal N
(``repro run``: 143 SIGTERM, 130 SIGINT, after checkpointing at a step boundary).
"""

from __future__ import annotations

import os
import sys

from repro.cli.common import allow_read
from repro.cli.parser import build_parser
from repro.config import overrides
from repro.errors import StoreError, UserError
from repro.store.runs import results_root
from repro.train import signals


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # overrides after the options (`run NAME --scale tiny key=value`) land here
        if not hasattr(args, "overrides") or not all(overrides.is_override(a) for a in extra):
            parser.error(f"unrecognized arguments: {' '.join(a for a in extra if not overrides.is_override(a))}")
        args.overrides += extra
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    args.entry = main  # what a launcher's job calls again (`repro run` hands it to submitit)
    try:
        allow_read(getattr(args, "allow_read", None) or [])
        results_root(getattr(args, "results", None))  # one that is not a folder: refused by every command
        status = args.func(args) or 0
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return status
    except BrokenPipeError:  # the reader left (`repro status | head -1`): what it read was all it wanted
        _quiet_stdout()
        return 0
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except StoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except signals.Interrupted as err:
        print(f"interrupted by {err.name}: {err.detail or 'no run was training'}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print(
            "interrupted: finished runs are stored; an unfinished run resumes from its last checkpoint", file=sys.stderr
        )
        return 130


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit does not fail on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
