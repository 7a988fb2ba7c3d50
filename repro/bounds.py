"""Bounds on what others' files may make the suite do (``docs/faults.md``): each is far above any real
use and refused past it in one line (exit status 2) within seconds, where unbounded input would hang
or exhaust memory.
"""

from __future__ import annotations

MAX_MANIFEST_BYTES = 1 << 20  # a manifest file (the largest shipped one is a few KB)
MAX_INCLUDES = 64  # files read for one manifest, includes of includes counted each time they are read
MAX_CELLS = 10_000  # runs of one manifest at one scale (the grid's product)
MAX_CORPUS_BYTES = 1 << 30  # a `file` corpus (text8 and enwik8 are 10^8 bytes)
ALLOW_READ = "REPRO_ALLOW_READ"  # further folders a manifest's `file` corpus may lie in (os.pathsep-separated)
TRUST_CODE = "REPRO_TRUST_CODE"  # further folders a manifest's renderer files may lie in (os.pathsep-separated)
