"""A run's identity: the hash of its resolved spec, which names its folder in the store.

Kept here, beside the store, so that every read of a stored run can check that the spec it holds is
the spec its folder (and its summary) names, without the config layer: ``repro.config.spec`` computes
a new run's id with the same function.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

SECTIONS = ("data", "model", "train", "eval")


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
