"""The report stage (``repro report``): a manifest's stored runs beside the paper's numbers, its figures,
and its claims judged, in ``results/reports/<manifest>.md`` (+ ``.csv``) per manifest, and
``results/REPORT.md`` over all of them.

Reads only the run store (and the manifest for the paper's reference values and claims). Each report is
assembled first, as data (:mod:`repro.report.assemble`), then written (:mod:`repro.report.page`,
:mod:`repro.report.overview`); the verdicts of the previous regeneration are read back from
``reports/verdicts.json``, never from the text written.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from repro.claims.stats import CONFIDENCE
from repro.config import lookup
from repro.config.access import NONE, Access
from repro.config.manifest import Manifest, discover
from repro.files import atomic, safeyaml
from repro.files.locks import FileLock
from repro.report import overview, page, renderers
from repro.report.assemble import assemble
from repro.report.content import Report
from repro.report.multiplicity import multiplicity
from repro.report.results import ClaimResult

KINDS = ("table", "fig")  # then the suite's ablations, by name
MAX_VERDICTS_BYTES = 64 * 2**20  # reports/verdicts.json: a few hundred KB for every verdict of the suite


@contextlib.contextmanager
def writing(root: Path) -> Iterator[None]:
    """Hold the reports folder's lock (reports of one store wait for each other) and remove the temp
    files a killed report left there (its files are atomic: a kill leaves only those)."""
    out_dir = root / "reports"
    with FileLock(out_dir / ".lock", wait=True):
        for folder in (out_dir, out_dir / "figures", out_dir / "tables"):
            atomic.clean_temps(folder)
        yield


def render(
    manifest: Manifest, root: Path, confidence: float = CONFIDENCE, capped: int | None = None
) -> tuple[Path, list[ClaimResult]]:
    """Write the manifest's report (``capped``: of its runs capped at that many steps, a page of its own);
    returns its path and the claims judged at every stored scale."""
    with writing(root):
        report = assemble(manifest, root, confidence, capped)
        return write(report, root), report.results


def write(report: Report, root: Path) -> Path:
    """The report's page, its runs' csv and its claims' csv, under ``root/reports``."""
    out_dir = root / "reports"
    path = out_dir / f"{report.name}.md"
    atomic.write_text(path, "\n".join(page.lines(report)))
    csv = page.runs_csv(report)
    if csv is not None:
        atomic.write_text(out_dir / f"{report.name}.csv", csv)
    if report.results:
        atomic.write_text(out_dir / "tables" / f"{report.name}-claims.csv", page.claims_csv(report.results))
    return path


def render_all(
    root: Path, confidence: float = CONFIDENCE, access: Access = NONE, echo: Callable[[str], None] = lambda line: None
) -> Path:
    """Every manifest's report plus ``REPORT.md``: the papers' artefacts in their order, each row's headline
    claim with its effect, the verdict counts, then each artefact's claims a line each (``access``: the
    folders the user allowed the manifests beyond their own). Each stored run a report leaves out (corrupt,
    unreadable, a link, a FIFO in place of its metrics) is a line to ``echo``, as ``repro status`` says it."""
    with writing(root):
        manifests = sorted(
            (renderers.check_loaded(lookup.load(p, access)) for p in discover().values()), key=paper_order
        )
        before = stored_verdicts(root)
        reports = []
        for manifest in manifests:  # each page written before the next is assembled, as `repro report` does
            reports.append(assemble(manifest, root, confidence))
            write(reports[-1], root)
            for kind, why in reports[-1].left:
                echo(f"{kind}: {why}")
        everything = [r for report in reports for r in report.results]
        family = multiplicity(everything, 1 - confidence, {m.name: m.family for m in manifests})
        out_dir = root / "reports"
        moved = overview.moved_verdicts(before, everything)
        if moved:  # none moved: the page stays as it was, so an unchanged store regenerates byte for byte
            atomic.write_text(out_dir / overview.MOVED_PAGE, "\n".join(moved))
        atomic.write_text(out_dir / overview.VERDICTS_JSON, overview.verdicts_json(everything))
        atomic.write_text(out_dir / overview.CLAIMS_PAGE, "\n".join(overview.claims_lines(reports)))
        path = root / "REPORT.md"
        atomic.write_text(path, "\n".join(overview.report_lines(reports, confidence, family)))
        return path


def stored_verdicts(root: Path) -> dict[tuple[str, str, str], str]:
    """(manifest, scale, claim) -> verdict, as the last regeneration stored them in ``reports/verdicts.json``
    (none: no previous regeneration to compare with). It is the suite's own output, so what is not its shape
    is left out, not an error: a key of other than three parts, an entry without a verdict, a file that is
    not a regular one (a FIFO is never read) or holds more than :data:`MAX_VERDICTS_BYTES`."""
    path = root / "reports" / overview.VERDICTS_JSON
    try:
        stored = json.loads(safeyaml.read_bounded(path, MAX_VERDICTS_BYTES, ValueError))
    except (ValueError, RecursionError):
        return {}
    if not isinstance(stored, dict):
        return {}
    found = {}
    for key, entry in stored.items():
        parts = tuple(key.split("\x1f"))
        if len(parts) == 3 and isinstance(entry, dict) and isinstance(entry.get("verdict"), str):
            found[parts] = entry["verdict"]
    return found


def paper_order(manifest: Manifest) -> tuple:
    """REPORT.md's order: the papers, then within each its tables, its figures (by number), the suite's
    ablations and the rest by name; pilots last."""
    papers = overview.PAPERS
    paper = papers.index(manifest.paper) if manifest.paper in papers else len(papers) - 1
    found = re.search(r"-(table|fig)(\d+)", manifest.name)
    kind = KINDS.index(found.group(1)) if found else len(KINDS)
    return (paper, kind, int(found.group(2)) if found else 0, manifest.name)
