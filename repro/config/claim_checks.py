"""The checks a manifest's claims get at load time that need the config stage (the grammar itself,
:mod:`repro.grammar.language`, imports nothing of it): every filter names one grid key, every metric is one
a run of the family stores, and comparisons that can hold by construction are warned of."""

from __future__ import annotations

import ast

from repro.config import keys, metrics
from repro.grammar.language import parse


def filter_keys(check: str, cell_keys: list[str]) -> list[tuple[str, str, str | None]]:
    """``(key, value, grid key)`` for every filter of ``check``; the grid key is None unless the key names
    exactly one of ``cell_keys`` (what ``repro validate`` refuses)."""
    out = []
    for _, filters in parse(check)[1]:
        for key, value in filters.items():
            matches = keys.matching(key, cell_keys)
            out.append((key, value, matches[0] if len(matches) == 1 else None))
    return out


def unknown_metrics(check: str, family: str | None) -> list[tuple[str, list[str]]]:
    """``(metric, close names)`` for every selection whose metric no run of ``family`` stores."""
    return [
        (m, metrics.close(m, family))
        for m, _ in parse(check)[1]
        if not metrics.known(m, family) and not m.startswith(("data.", "model.", "train.", "eval."))
    ]


def by_construction(check: str, cell_keys: list[str]) -> list[str]:
    """Warnings: comparisons that can hold by construction, whatever was learned (a metric that counts a
    grid key's value, compared across cells that differ in that key)."""
    tree, selections = parse(check)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        used = [
            [selections[int(n.id[2:])] for n in ast.walk(side) if isinstance(n, ast.Name) and n.id.startswith("_s")]
            for side in sides
        ]
        for metric, (counted, why) in metrics.COUNTS.items():
            for key in counted:
                values = {
                    next((v for k, v in f.items() if key in keys.matching(k, cell_keys) or k == key), None)
                    for side in used
                    for m, f in side
                    if m == metric
                }
                if len(values) > 1 and None not in values:
                    out.append(
                        f"{metric} counts {key} ({why}): comparing it across "
                        f"{key} = {', '.join(sorted(values))} can hold by construction"
                    )
    return list(dict.fromkeys(out))
