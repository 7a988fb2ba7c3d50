"""The ``repro`` command: one module per command (``run``, ``status``, ...), each declaring its ``COMMAND``
(name, help, options, handler), the list of them (``commands.py``), the parser that binds them
(``parser.py``) and the command line's run (``command.py``), which maps the suite's errors to exit statuses.

:func:`main`, the entry point, loads nothing before it has checked where it runs: a working directory
that no longer exists is refused in one line before any library is imported (torch's MKL dies on import
there with a fatal error of its own), and a Ctrl-C while the libraries load (a second or more) ends in
one line too, not a traceback.
"""

from __future__ import annotations

import os
import sys

GONE = (
    "error: the working directory no longer exists (it was deleted or moved); cd to a folder that exists "
    "and run the command again"
)
STARTING = "interrupted by SIGINT while starting: nothing was done"


def main(argv: list[str] | None = None) -> int:
    try:
        os.getcwd()
    except FileNotFoundError:
        print(GONE, file=sys.stderr)
        return 2
    try:
        from repro.cli import command  # pandas, pydantic, the parser: what every command needs

        return command.main(argv)
    except KeyboardInterrupt:  # once the command runs, its own handler says what an interruption leaves
        print(STARTING, file=sys.stderr)
        return 130


__all__ = ["main"]
