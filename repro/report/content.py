"""What a manifest's report says, as data: built once from the store (:mod:`repro.report.assemble`), then
written as the page and as REPORT.md's rows (:mod:`repro.report.page`, :mod:`repro.report.overview`) by
writers that read nothing else, so that each can be tested on an object built by hand."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from repro.report.results import ClaimResult


@dataclass
class Shown:
    """A file a renderer wrote, as the page shows it; paths relative to the reports folder."""

    path: str
    caption: str
    table: str | None = None  # a table's markdown, inlined (None: a figure or another file, linked)
    csv: str = ""  # a table's csv


@dataclass
class Precondition:
    """A claim's precondition judged at one scale: its label on the page (``P1``), and whether it held."""

    label: str
    check: str
    held: str  # holds / fails / not evaluable
    detail: str


@dataclass
class Section:
    """One scale of a report: its runs' table, the other runs apart, its figures, its claims judged."""

    scale: str
    dataset: str  # the corpus of the current runs ("": none of them is stored)
    expected: int  # the runs of the manifest's current resolution at this scale
    evaluation: list[str] = field(default_factory=list)  # how the runs were scored, once per procedure
    left_out: list[str] = field(default_factory=list)  # why the manifest leaves cells out at this scale
    table: pd.DataFrame | None = None  # a row per grid cell (seed means ± sd); None: no current run
    runs: pd.DataFrame | None = None  # a row per run, each seed apart (the csv's)
    gaps: tuple[int, int, str] | None = None  # (cells whose valid and test bits lie far apart, cells, widest)
    others: pd.DataFrame | None = None  # the other stored runs at this scale, never used
    figures: list[Shown] = field(default_factory=list)
    judges: bool = False  # claims are judged here (the manifest's or a renderer's)
    preconditions: list[Precondition] = field(default_factory=list)
    claims: list[ClaimResult] = field(default_factory=list)  # the manifest's claims
    drawn: list[ClaimResult] = field(default_factory=list)  # the verdicts the renderers reached
    capped: int | None = None  # its runs are the manifest's capped at this many steps (``--max-steps``)

    @property
    def results(self) -> list[ClaimResult]:
        return [*self.claims, *self.drawn]


@dataclass
class Note:
    """Notes a report quotes: the manifest's ``own``, its ``base`` file's (a derived manifest), or an
    ``included`` file's; ``source`` is the file as the heading names it."""

    kind: str
    source: str
    text: str


@dataclass
class Report:
    """One manifest's report: everything its page and its rows of REPORT.md say."""

    name: str
    title: str  # with the corpora its stored scales ran on
    file: str  # the manifest's file name
    paper: str
    command: str  # how ``repro run`` names it
    scales: list[str]  # the manifest's scales, in its order
    confidence: float
    left: list[tuple[str, str]] = field(default_factory=list)  # stored runs left out: (kind, why)
    overrides: str = ""  # a derived manifest's ``KEY=VALUE`` changes
    sweeps: bool = False  # ... that sweep grid axes (else set in every run)
    description: str = ""
    claims: list[tuple[str, str, str]] = field(default_factory=list)  # (id, text, check)
    trains: bool = True  # False: the renderers draw from the manifest (and its parts) alone
    parts: list[str] = field(default_factory=list)
    figures: list[Shown] = field(default_factory=list)  # a manifest that trains nothing
    unstored: str | None = None  # no run stored: the scale ``repro run`` would train first
    elsewhere: list[str] = field(default_factory=list)  # ... and the manifests of its base that have runs
    sections: list[Section] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)  # the scales its runs (or its parts') are stored at
    headline: str | None = None  # the claim its rows of REPORT.md lead with

    @property
    def results(self) -> list[ClaimResult]:
        """Every claim judged, scale by scale."""
        return [r for s in self.sections for r in s.results]
