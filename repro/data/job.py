"""One preparation: where the source is, where the output goes, and what was verified on the way."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from repro.data import fetch


@dataclass
class Job:
    """Inputs of a dataset's ``prepare`` function.

    ``src`` is the user's ``--from`` path (None: download, or use the installed Debian files);
    ``out`` is the temporary directory to write splits into; ``downloads`` caches fetched archives.
    Every pinned check goes through :meth:`check_file`/:meth:`check_bytes`, which record what could
    not be verified (only possible with ``allow_unverified``).
    """

    src: Path | None
    out: Path
    downloads: Path
    allow_unverified: bool = False
    options: dict = field(default_factory=dict)
    unverified: list[str] = field(default_factory=list)

    def check_file(self, path: Path, pin: fetch.Pin) -> None:
        if not fetch.check_file(path, pin, self.allow_unverified):
            self.unverified.append(str(path))

    def check_bytes(self, what: str, data: bytes, pin: fetch.Pin) -> None:
        if not fetch.check_bytes(what, data, pin, self.allow_unverified):
            self.unverified.append(what)

    def download(self, url: str, filename: str, pin: fetch.Pin) -> Path:
        path = fetch.download(url, self.downloads / filename, pin, self.allow_unverified)
        if not fetch.check_file(path, pin, allow_unverified=True):
            self.unverified.append(str(path))
        return path
