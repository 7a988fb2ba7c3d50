"""A manifest's page, written from its :class:`~repro.report.content.Report` alone (no store, no files read):
``reports/<manifest>.md``, its runs' csv and its claims' csv.

The page opens with the verdict counts and the claims, then says which stored runs are left out and what
a derived manifest is, then each scale: its runs' table, the other stored runs apart, its figures, its
claims judged; the notes close it.
"""

from __future__ import annotations

import math
import re
from pathlib import PurePath

import pandas as pd

from repro.config import capped as capping
from repro.report.content import Note, Report, Section, Shown
from repro.report.renderers import markdown_table
from repro.report.results import COUNTED, ClaimResult, rule_line, verdict_table

SCALE_NOTE = {
    "tiny": "**Scale: tiny** (2 CPU cores, minutes per run, offline stand-in corpora). These are NOT the "
    "paper's numbers and are not comparable to them in absolute terms; only qualitative findings "
    "are checked.",
    "cpu": "**Scale: cpu** (2 CPU cores, up to 30 minutes per run, offline stand-in corpora; how it was chosen: "
    "results/studies/cpu-scale.md). NOT the paper's numbers.",
    "small": "**Scale: small** (one GPU or a long CPU run). Smaller than the paper's models; absolute "
    "numbers are not the paper's.",
    "paper": "**Scale: paper** (the paper's configuration).",
    "probe": "**Scale: probe** (synthetic mechanism checks on generated corpora whose right answer is known, 2 CPU "
    "cores, minutes per run: docs/probes.md). NOT the papers' numbers and not their data.",
}
# a run left out (repro.store.runs.LeftOut): a linked or damaged one's line says it all
HOW = {"corrupt": " (`repro run` redoes it)", "unreadable": " (this user may not read it)", "linked": "", "damaged": ""}
IMAGES = (".png", ".svg", ".jpg", ".jpeg", ".gif")
_BASE_NOTES = (
    "Written for that file's own settings, not for the overrides above: where they name a value the "
    "overrides changed (a step count, an R, a scale's recipe), the tables and claims of this report are the "
    "measured truth."
)
_INCLUDED_NOTES = (
    "Written for the manifests that include that file (its recipe's choices), not for this one: where this "
    "manifest sets other values, its own keys and the tables and claims of this report are the measured truth."
)


CAPPED_NOTE = (
    "**Capped runs** (`repro report --max-steps {steps}`): each run below is the manifest's run at `{scale}` "
    "trained for only {steps:,} steps (`repro run {command} --max-steps {steps}`), not the run the manifest "
    "specifies; its tables, figures and verdicts say what so short a run shows, nothing more."
)


def lines(report: Report) -> list[str]:
    """The page's markdown, line by line."""
    out = [f"# {report.title}", "", f"Manifest `{report.name}` ({report.file}), paper `{report.paper}`.", ""]
    if report.results:
        summary = verdict_table([(f"`{report.name}`", None, report.results)], report.scales)
        out += [f"Verdicts per scale ({' / '.join(COUNTED)}).", "", rule_line(report.confidence), "", summary, ""]
    out += _claims_defined(report)
    out += [f"- {kind} run, left out{HOW[kind]}: {why}" for kind, why in report.left] + [""] * bool(report.left)
    out += _derived(report)
    if report.description:
        out += [report.description.strip(), ""]
    if not report.trains:
        gathered = ", ".join(f"`{p}`" for p in report.parts)
        out += [f"Gathered from the stored runs of {gathered}." if report.parts else "This artefact needs no training."]
        out += [""] + [line for shown in report.figures for line in _embed(shown)]
    elif report.unstored:
        out += [f"No stored runs yet: `repro run {report.command} --scale {report.unstored}`.", ""]
        out += report.elsewhere
    for section in report.sections:
        out += _section(report, section)
    return out + [line for note in _grouped(report.notes) for line in note]


def runs_csv(report: Report) -> str | None:
    """Every run of the tables, each seed apart, by scale (None: no scale has runs stored)."""
    frames = [s.runs for s in report.sections if s.runs is not None]
    return pd.concat(frames).to_csv(index=False) if frames else None


def claims_csv(results: list[ClaimResult]) -> str:
    """Every claim judged, with the full numbers the report's lines leave out."""
    frame = pd.DataFrame(
        [
            {
                "scale": r.scale,
                "claim": r.id,
                "verdict": r.status,
                "seeds": r.verdict.seeds,
                "p": r.verdict.p,
                "p two-sided": r.verdict.p_two_sided,
                "p sign-flip": r.verdict.decided.p_sign_flip if r.verdict.decided else math.nan,
                "sesoi": r.verdict.sesoi,
                "mde": r.verdict.mde,
                "uninformative": r.verdict.uninformative,
                "effect": r.verdict.effect,
                "failed preconditions": "; ".join(r.verdict.failed),
                "gate": r.verdict.control or "",
                "held": "; ".join(r.verdict.held),
                "dropped": "; ".join(r.verdict.dropped),
                "post hoc": r.verdict.post_hoc,
                "detail": r.verdict.detail,
                "check": r.check,
            }
            for r in results
        ]
    )
    return frame.to_csv(index=False)


def _claims_defined(report: Report) -> list[str]:
    """The claims once, text and check, and where their full numbers are."""
    if not report.claims:
        return []
    out = ["## Claims", ""]
    for claim_id, text, check in report.claims:
        out += [f"- **{claim_id}**: {text}", f"  `{check}`"]
    csv = f"tables/{report.name}-claims.csv"
    return [
        *out,
        "",
        f"Each verdict's full numbers (every selection's mean ± sd, every cell's margin): [{csv}]({csv}).",
        "",
    ]


def _derived(report: Report) -> list[str]:
    """What a manifest derived by overrides is (``-m``/``KEY=VALUE`` on the command line, or a saved file
    that ``include:``s another with ``set``/``sweep``): the lines that open its report."""
    if not report.overrides:
        return []
    return [
        f"**Derived** from `{report.file}` with `{report.overrides}` ({'sweeps: grid axes' if report.sweeps else 'set in every run'}): "
        f"its runs are stored apart, under `runs/{report.name}/`, and only they enter the tables, figures and "
        f"claims below. The description and notes are the file's, written for its own settings.",
        "",
    ]


def _section(report: Report, s: Section) -> list[str]:
    """One scale: heading, scale note, how the runs were scored, the table, the others, figures, claims."""
    fill = f"`repro run {report.command} --scale {s.scale}`"
    stored = s.table is not None
    heading = f"dataset: {s.dataset}" if stored else "no run of the current resolution stored"
    capped = f" — **{capping.label(s.capped)}**" if s.capped else ""
    out = [f"## Scale `{s.scale}`{capped} — {heading}", "", SCALE_NOTE.get(s.scale, f"**Scale: {s.scale}**"), ""]
    if s.capped:
        out += [CAPPED_NOTE.format(steps=s.capped, scale=s.scale, command=report.command), ""]
    if stored:
        out += ["Evaluation: " + "; ".join(s.evaluation) + ".", ""]
    out += [f"- left out: {why}" for why in s.left_out] + [""] * bool(s.left_out)
    out += [
        markdown_table(s.table)
        if stored
        else f"None of the {s.expected} run(s) of the current resolution is stored: {fill} "
        f"trains them; then `repro report {report.command}` fills this section.",
        "",
    ]
    if s.gaps:
        said, cells, widest = s.gaps
        out += [f"**Valid against test** ({said} of {cells} cells), the widest gap: {widest}.", ""]
    if s.others is not None and not s.others.empty:
        out += [
            f"Other stored runs at this scale ({len(s.others)}), **not used** in the tables, figures or "
            "claims above: their spec differs from the manifest's current resolution (a `--max-steps` "
            "run, or a spec from an older version of the manifest or code).",
            "",
            markdown_table(s.others),
            "",
        ]
    out += [line for shown in s.figures for line in _embed(shown)]
    if s.judges:
        out += [f"### Claims at scale `{s.scale}`{capped}", "", *_preconditions(s)]
        labels = {p.check: p.label for p in s.preconditions}
        out += [r.line(labels) for r in s.claims] + [r.line({}) for r in s.drawn] + [""]
    return [*out, ""]


def _preconditions(s: Section) -> list[str]:
    """The claims' preconditions at one scale in a table, once (each claim's line names them by label)."""
    if not s.preconditions:
        return []
    out = [
        "Preconditions, each on every seed (*learned*: bits below 0.8 x the unigram bits):",
        "",
        "| | precondition | | values |",
        "|---|---|---|---|",
    ]
    return [*out, *(f"| {p.label} | `{p.check}` | {p.held} | {p.detail} |" for p in s.preconditions), ""]


def _embed(shown: Shown) -> list[str]:
    """A renderer's file: a table inlined (its headings under the section's), a figure embedded, anything
    else linked."""
    if shown.table is not None:
        table = re.sub(r"^(#+) ", lambda m: "#" * min(len(m.group(1)) + 3, 6) + " ", shown.table.strip(), flags=re.M)
        return [table, "", f"([{PurePath(shown.path).name}]({shown.path}), [csv]({shown.csv}))", ""]
    if PurePath(shown.path).suffix in IMAGES:
        return [f"![{shown.caption}]({shown.path})", "", f"*{shown.caption}*", ""]
    return [f"[{shown.caption}]({shown.path})", ""]


def _grouped(notes: list[Note]) -> list[list[str]]:
    """The notes' blocks: a derived manifest's base notes; else the manifest's own under one heading, then
    each included file's apart, quoted under the file's name (a user's manifest that includes a shipped
    recipe does not present the recipe's notes as its own)."""
    own = [n.text.strip() for n in notes if n.kind == "own"]
    blocks = [["## Notes", "", *own, ""]] if own else []
    for n in notes:
        if n.kind != "own":
            head, why = ("", _BASE_NOTES) if n.kind == "base" else ("the included ", _INCLUDED_NOTES)
            blocks.append([f"## Notes of {head}`{n.source}`", "", why, "", *_quoted(n.text), ""])
    return blocks


def _quoted(text: str) -> list[str]:
    """Text as a markdown quote, line by line."""
    return [f"> {line}".rstrip() for line in text.strip().splitlines()]
