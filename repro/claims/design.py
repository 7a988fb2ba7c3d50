"""A claim's *design* (issue 60): what fixes how it is judged, to be written before its runs exist: its
check (the comparison and its threshold), its premises (``requires``, the manifest's first), its
controls, its smallest effect of interest, the split it is judged on, the looks of its scale's seeds and
the family REPORT.md adjusts it in. Read from a manifest's merged document *as written* (no validation:
a past commit's manifest, which today's rules may refuse, reads alike), and hashed, so that the store can
record it with a run (:mod:`repro.claims.registration`) and a later design be told from it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from repro.claims import sequential
from repro.grammar import language

PARTS = ("check", "requires", "controls", "sesoi", "split", "looks", "family")


def _text(value: Any) -> str:
    """A check as a comparable string: its whitespace (a folded YAML string's line breaks) collapsed."""
    return " ".join(str(value).split())


def _split(declared: Any, check: str) -> str:
    """The split a claim is judged on: the manifest's declared one, else the one its check's bits score
    (before manifests declared it, the check named it), else the default (test)."""
    if isinstance(declared, str) and declared:
        return declared
    try:
        named = [language.split_of(m) for m, _ in language.parse(check)[1]]
    except language.ClaimError:
        named = []
    return next((s for s in named if s), language.SPLITS[0])


def _looks(seeds: Any) -> list[int] | str:
    try:
        return list(sequential.looks_of(seeds).counts)
    except (TypeError, ValueError, KeyError, AttributeError):
        return _text(seeds)


def family_of(doc: dict[str, Any]) -> str:
    """The family a manifest's findings are adjusted in: its declared ``family``, else its paper."""
    return str(doc.get("family") or doc.get("paper") or "?")


def of_document(doc: dict[str, Any], scale: str) -> dict[str, dict[str, Any]]:
    """claim id -> its design at ``scale``, for each claim of a merged manifest document judged there."""
    claims = doc.get("claims") if isinstance(doc.get("claims"), list) else []
    shared = [_text(r) for r in doc.get("requires") or [] if isinstance(doc.get("requires"), list)]
    scales = doc.get("scales") if isinstance(doc.get("scales"), dict) else {}
    own = scales.get(scale) if isinstance(scales.get(scale), dict) else {}
    looks = _looks(own.get("seeds") or doc.get("seeds") or 1)
    out = {}
    for i, claim in enumerate(claims):
        if not isinstance(claim, dict) or "check" not in claim:
            continue
        if isinstance(claim.get("scales"), list) and scale not in claim["scales"]:
            continue
        check = _text(claim["check"])
        requires = [_text(r) for r in claim.get("requires") or []]
        sesoi = claim.get("sesoi")
        out[str(claim.get("id", i))] = {
            "check": check,
            "requires": [r for r in dict.fromkeys([*shared, *requires]) if r != check],
            "controls": [_text(c) for c in claim.get("controls") or []],
            "sesoi": float(sesoi) if isinstance(sesoi, (int, float)) and not isinstance(sesoi, bool) else None,
            "split": _split(doc.get("split"), check),
            "looks": looks,
            "family": family_of(doc),
        }
    return out


def digest(design: dict[str, Any]) -> str:
    """The design's hash: 12 hex digits of sha256 over its parts, canonically written."""
    return hashlib.sha256(json.dumps(design, sort_keys=True).encode()).hexdigest()[:12]


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The parts (:data:`PARTS`) that differ between two designs of one claim, in that order."""
    return [p for p in PARTS if before.get(p) != after.get(p)]
