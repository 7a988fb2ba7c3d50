"""Files no report references: figures and tables that ``repro report --all`` leaves behind when a
manifest's runs or renderers change (a figure named for an old run id), removed so that
``reports/figures/`` holds only what the reports show."""

from __future__ import annotations

import re
from pathlib import Path

FOLDERS = ("figures", "tables")
_LINK = re.compile(r"\((?:\./)?((?:figures|tables)/[^)\s]+)\)")


def unreferenced(root: Path) -> list[Path]:
    """The files under ``reports/figures`` and ``reports/tables`` that no report links (``REPORT.md`` and
    every ``reports/*.md``); a figure's PDF and a table's CSV go with the PNG and markdown linked."""
    reports = root / "reports"
    linked: set[str] = set()
    for page in [root / "REPORT.md", *sorted(reports.glob("*.md"))]:
        if page.is_file():
            linked.update(_LINK.findall(page.read_text(encoding="utf-8")))
    kept = {_twin_key(name) for name in linked}
    return [
        path
        for folder in FOLDERS
        for path in sorted((reports / folder).glob("*"))
        if path.is_file() and _twin_key(f"{folder}/{path.name}") not in kept
    ]


def remove_unreferenced(root: Path) -> list[Path]:
    removed = unreferenced(root)
    for path in removed:
        path.unlink()
    return removed


def _twin_key(name: str) -> str:
    """A file's name without the extension its twin differs by (png/pdf, md/csv)."""
    for ext in (".png", ".pdf", ".md", ".csv"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name
