"""Errors raised by the data layer; all are user errors (one-line message, exit status 2)."""

from __future__ import annotations

from repro.errors import UserError


class DataError(UserError):
    """Bad data input: unknown dataset or option, corrupt archive, unusable source."""


class DatasetMissing(DataError):
    """A dataset a run needs has not been prepared; the message holds the exact command that prepares it."""


class ChecksumMismatch(DataError):
    """A file's size or hash differs from the pinned value; the message names both values."""


class CorruptData(DataError):
    """A prepared dataset's file does not parse (meta.json, a .npy header); the message names it."""
