"""Plain-text tables for the terminal (every command that lists things prints through here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def print_table(rows: Iterable[Sequence[object]]) -> None:
    """Print ``rows`` (the first one a header, if the table has one) as columns padded to their widest
    cell, two spaces apart; cells are shown with ``str``."""
    cells = [[str(c) for c in row] for row in rows]
    if not cells:
        return
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(max(map(len, cells)))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
