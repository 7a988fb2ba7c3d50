"""One preparation: where the source is, where the output goes, and what was verified on the way."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from repro.data import fetch
from repro.data.debian import Release


@dataclass
class Job:
    """Inputs of a dataset's ``prepare`` function.

    ``src`` is the user's ``--from`` path or the unpacked Debian package's files (None: download);
    ``out`` is the temporary directory to write splits into; ``downloads`` caches fetched archives.
    Every pinned check goes through :meth:`check_file`/:meth:`check_bytes`, which record what could
    not be verified (only possible with ``allow_unverified``). A Debian-sourced dataset checks its files
    with :meth:`check_release` against ``releases``, the known releases its source may still be.
    """

    src: Path | None
    out: Path
    downloads: Path
    allow_unverified: bool = False
    options: dict = field(default_factory=dict)
    unverified: list[str] = field(default_factory=list)
    releases: tuple[Release, ...] = ()

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

    def check_release(self, key: str, what: str, data: bytes | Path) -> None:
        """Check a file (``key`` in the releases' content pins) and keep only the releases it matches.

        A file that matches none is refused, naming each release's pin, or recorded as unverified.
        Without releases (a version that is not pinned, already recorded) there is nothing to check.
        """
        if not self.releases:
            return
        size = data.stat().st_size if isinstance(data, Path) else len(data)
        digest = fetch.digest_file(data) if isinstance(data, Path) else fetch.digest_bytes(data)
        matching = tuple(r for r in self.releases if fetch.matches(size, digest, r.content[key]))
        if matching:
            self.releases = matching
            return
        pins: dict[fetch.Pin, list[str]] = {}
        for r in self.releases:
            pins.setdefault(r.content[key], []).append(r.version)
        expected = "; ".join(f"{', '.join(v)}: sha256 {p.digest}, {p.size:,} bytes" for p, v in pins.items())
        fetch.refuse_unless(
            f"{what}: sha256 {digest}, {size:,} bytes; expected a pinned release's ({expected})", self.allow_unverified
        )
        self.unverified.append(what)
