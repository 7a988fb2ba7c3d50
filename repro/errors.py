"""Errors the CLI reports on one line, without a traceback.

``UserError``: bad input (manifest, flag, missing data); exit status 2. ``StoreError``: the file system
refused a write (disk full, read-only, permissions), and ``RunFailed``: a run stopped by something the user
can change (out of memory); exit status 1. Their messages name what and where.
"""


class UserError(Exception):
    """Bad input from the user (manifest, flag, missing data). The message names what and where."""


class StoreError(Exception):
    """A write to the run store or data root failed; the message names the path and the OS error."""


class RunFailed(Exception):
    """A run stopped, marked failed, for a reason the user can act on (out of memory); resumable."""
