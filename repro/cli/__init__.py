"""The ``repro`` command: one module per command (``run``, ``status``, ...), the parser that binds them
(``parser.py``) and ``main`` (``main.py``), which maps the suite's errors to exit statuses."""

from repro.cli.main import main

__all__ = ["main"]
