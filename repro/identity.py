"""What names a run in the store: its run id (the hash of its resolved spec) and the plain names that
become path components (a manifest's name, a run id).

On the first floor, so that the config stage (which computes a new run's id and checks a manifest's name)
and the store (which checks every stored spec against the id its folder names) share one definition
without either importing the other.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from repro.errors import UserError

SECTIONS = ("data", "model", "train", "eval")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_NAME = 200  # a path component (NAME_MAX is 255 bytes; the store adds suffixes such as .json)


def identity(spec: dict[str, Any]) -> dict[str, Any]:
    """What of a resolved spec (or a stored spec.yaml) decides the run's result: its four sections, a
    `file` corpus by its content hash, not its location (the same corpus anywhere is the same run)."""
    out = {section: spec.get(section) for section in SECTIONS}
    data = out["data"]
    if isinstance(data, dict) and data.get("sha256") is not None:
        out["data"] = {k: v for k, v in data.items() if k != "path"}
    return out


def spec_id(spec: dict[str, Any]) -> str:
    """The run id: the first 12 hex digits of the sha256 of :func:`identity` as canonical JSON (a value
    JSON cannot hold, which no resolved spec has, is hashed by its repr: a mismatch, never a crash)."""
    blob = json.dumps(identity(spec), sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def is_plain(name: Any) -> bool:
    """Whether ``name`` is one plain path component (letters, digits, ``-``, ``_``, ``.``, not first)."""
    return isinstance(name, str) and bool(NAME.fullmatch(name)) and len(name) <= MAX_NAME


def check_name(name: str, what: str = "name") -> str:
    """A manifest name is one plain path component (:func:`is_plain`), so that everything the store
    writes stays under the results root."""
    if not is_plain(name):
        raise UserError(
            f"{what}: {str(name)[:80]!r}{'...' if len(str(name)) > 80 else ''} is not a plain name; allowed: letters, "
            f"digits, '-', '_', '.', starting with a letter or digit, at most {MAX_NAME} characters"
        )
    return name
