"""``repro run``'s filters over a plan's runs: ``--only KEY=VALUE`` and ``--max-steps N``."""

from __future__ import annotations

from collections.abc import Sequence

from repro.config.keys import matching
from repro.config.spec import RunSpec
from repro.errors import UserError


def select(specs: list[RunSpec], only: Sequence[str]) -> list[RunSpec]:
    """Keep the runs whose grid cell matches every ``KEY=VALUE`` (a key may be a dotted suffix)."""
    for item in only:
        key, eq, value = item.partition("=")
        if not eq:
            raise UserError(f"--only {item!r}: expected KEY=VALUE")
        keys = set(matching(key, {k for s in specs for k in s.cell}))
        if len(keys) != 1:
            known = sorted({k for s in specs for k in s.cell})
            raise UserError(
                f"--only {item!r}: {key!r} matches {len(keys)} grid keys; grid keys: {', '.join(known) or 'none'}"
            )
        (full,) = keys
        kept = [s for s in specs if str(s.cell[full]) == value]
        if not kept:
            values = list(dict.fromkeys(str(s.cell[full]) for s in specs))
            raise UserError(
                f"--only {item!r}: no run has {full}={value}; {full} takes: {', '.join(values)}"
                + ("" if len(only) == 1 else " (after the other --only filters)")
            )
        specs = kept
    return specs
