"""The folders a user lets manifests reach beyond their own (``docs/faults.md``, the trust model).

Given on the command line (``--allow-read``, ``--trust-code``) or in ``$REPRO_ALLOW_READ`` and
``$REPRO_TRUST_CODE``, read once where the command starts (``repro.cli.common.access``) and passed from
there as a value: to the manifests it loads, and in the job description of every process it starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Access:
    read: tuple[Path, ...] = ()  # where a `file` corpus may lie, besides the folders of the manifest's files
    code: tuple[Path, ...] = ()  # where renderer files may lie, besides the manifest's folder and analysis/


NONE = Access()  # the manifest's own folders only
