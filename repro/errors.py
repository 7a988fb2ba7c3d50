"""User-facing errors: the CLI prints the message on one line and exits with status 2, no traceback."""


class UserError(Exception):
    """Bad input from the user (manifest, flag, missing data). The message names what and where."""
