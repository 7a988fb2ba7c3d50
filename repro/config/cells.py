"""Grid cells in words: how every report, claim, status line and run name shows a cell's values.

A value is shown as the manifest writes it, never as a Python repr: a data row ``{name: moh-audio,
seq_len: 1024}`` reads ``name=moh-audio seq_len=1024``, a list ``[1, 2]`` reads ``1,2``; a scalar reads as ``str`` (what a claim's filter ``key=value`` matches).
"""

from __future__ import annotations

from typing import Any


def value_text(value: Any) -> str:
    """One grid value in words."""
    if isinstance(value, dict):
        return " ".join(f"{k}={value_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(value_text(v) for v in value)
    return str(value)


def cell_text(cell: dict[str, Any]) -> str:
    """A grid cell in words, each key by its last dotted part: ``kind=adaptive limit=4096``; a mapping
    value (a data row) shows its own keys: ``name=moh-audio seq_len=1024 d_model=32``."""
    return " ".join(
        value_text(v) if isinstance(v, dict) else f"{k.rsplit('.', 1)[-1]}={value_text(v)}" for k, v in cell.items()
    )
