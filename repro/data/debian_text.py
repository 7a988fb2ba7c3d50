"""Small Debian text corpora for the far-context pilot (results/studies/cpu-context.md).

Each is a byte stream of a pinned package's files, chosen for a kind of dependency that reaches far
back: ``unicode-data`` is a table (one record per line, fields in fixed order, names that repeat the
previous line's prefix), ``iso-codes`` is JSON records whose keys recur every record, and
``eigen-headers`` is C++ source, where identifiers, indentation and brackets repeat hundreds of bytes
back. Like linux-doc they are split 90/5/5 as raw bytes; each package is pinned by its .deb and by the
joined text (files in sorted path order, each ending in a newline).
"""

from __future__ import annotations

from pathlib import Path

from repro.data import archives
from repro.data import vocab as vocabs
from repro.data.debian import Package, Release
from repro.data.errors import DataError
from repro.data.fetch import Pin
from repro.data.job import Job
from repro.data.text import byte_ids, save_stream

UNICODE_DATA = Package(
    "unicode-data",
    "usr/share/unicode",
    (
        Release(
            "15.0.0-1",
            Pin(7_983_784, "5efef23bbb1c6a133ecbdd63a2cfa07159ccacf5466a49e2426101c5ecd691fc"),
            {"text": Pin(1_913_704, "806e9aed65037197f1ec85e12be6e8cd870fc5608b4de0fffd990f689f376a73")},
        ),
    ),
)
ISO_CODES = Package(
    "iso-codes",
    "usr/share/iso-codes/json",
    (
        Release(
            "4.15.0-1",
            Pin(2_906_084, "b1beb869303229c38288d4ddacfd582c91f594759b5767c9cecebd87f16ff70e"),
            {"text": Pin(1_504_377, "6392cd9cdf6bbc990db582c8cf5496584e9487803068ba1ca81e4396733ebc6f")},
        ),
    ),
)
EIGEN_HEADERS = Package(
    "libeigen3-dev",
    "usr/include/eigen3",
    (
        Release(
            "3.4.0-4",
            Pin(1_040_780, "1a167bb381acb90c1d8450a8f3e66a09d216dbc64b33ac8a082a0912513ef939"),
            {"text": Pin(8_509_914, "d797e254a74f37fcf3f8ade17bbf456ac744f8db9f62ea3f2828c4944de414d7")},
        ),
    ),
)

# Which files of each package's root make its text (a glob, matched recursively for the headers).
_FILES = {
    UNICODE_DATA.name: "UnicodeData.txt",
    ISO_CODES.name: "iso_*.json",  # the code lists, not their schema-*.json
    EIGEN_HEADERS.name: "**/*.h",
}


def joined(root: Path, pattern: str) -> tuple[bytes, int]:
    """The regular files under ``root`` matching ``pattern``, in sorted path order, each ending in a newline."""
    files = sorted((p for p in root.glob(pattern) if p.is_file()), key=lambda p: p.relative_to(root).as_posix())
    if not files:
        raise DataError(f"{root}: no files matching {pattern}")
    parts = [archives.gunzip_or_read(p) for p in files]
    return b"".join(t if t.endswith(b"\n") else t + b"\n" for t in parts), len(files)


def _prepare(package: Package):
    def prepare(job: Job) -> dict:
        data, count = joined(job.src, _FILES[package.name])
        job.check_release("text", f"{job.src} ({_FILES[package.name]} joined)", data)
        return save_stream(job, byte_ids(data), vocabs.raw_bytes(), {"files": count})

    prepare.__name__ = prepare.__qualname__ = f"prepare_{package.name.replace('-', '_')}"
    return prepare


prepare_unicode_data = _prepare(UNICODE_DATA)
prepare_iso_codes = _prepare(ISO_CODES)
prepare_eigen_headers = _prepare(EIGEN_HEADERS)
