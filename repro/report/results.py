"""A claim's result in a report: its verdict at one scale, how the verdict tables count it, and the line
that says it (on the manifest's page, and shorter in REPORT.md); the verdict tables and rule both show."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from repro.claims import verdict as verdicts
from repro.config import capped as capping
from repro.grammar import language

COST = "cost check"
# apart from the findings: sanity checks (the model learned) that held, and cost checks (FLOPs, memory)
SANITY = "sanity check"
COUNTED = (*verdicts.VERDICTS, SANITY, COST)


@dataclass
class ClaimResult:
    manifest: str
    scale: str
    id: str
    text: str
    check: str
    verdict: verdicts.Verdict
    data: str = ""  # the corpus and its unit, e.g. "linux-doc 6.1.192-3 (bits per byte)"
    adjusted: tuple[str, str] | None = None  # (Holm's verdict, Benjamini-Hochberg's), in REPORT.md
    kind: str = ""  # the check's kind (repro.grammar.language.kind); found from ``check`` where not given
    remedy: str = ""  # not evaluable: the command that would make it evaluable and its cost (repro.report.cost)
    capped: int | None = None  # judged on the runs capped at this many steps (``--max-steps``)

    def __post_init__(self) -> None:
        if not self.kind:
            try:
                self.kind = language.kind(self.check)
            except language.ClaimError:  # a renderer's own verdict: no check in the claim grammar
                self.kind = language.FINDING

    @property
    def sanity(self) -> bool:
        """Made only of ``learned[...]``: says the model trained, not what the paper found."""
        return self.kind == language.SANITY

    @property
    def cost(self) -> bool:
        """Made only of cost metrics (FLOPs, parameters, memory): a cost check, counted apart from findings."""
        return self.kind == language.COST

    @property
    def counted(self) -> str:
        """The column of the verdict tables this result is counted in: the verdict its line leads with
        (Holm's in REPORT.md; a sanity check, whatever it read, is never counted among the findings)."""
        if self.sanity:
            return SANITY
        if self.cost and self.verdict.status != verdicts.NOT_EVALUABLE:
            return COST
        return self.adjusted[0] if self.adjusted else self.verdict.status  # as the line leads: Holm's where adjusted

    @property
    def status(self) -> str:
        """The verdict as a row shows it: a sanity check reads *trained* / *did not learn* / *learning
        unclear* (within noise)."""
        v = self.verdict
        if self.sanity and (v.status in (verdicts.REPRODUCED, verdicts.NOT_REPRODUCED) or v.holds is not None):
            return "trained" if v.status == verdicts.REPRODUCED or v.holds else "did not learn"
        if self.sanity and v.status == verdicts.WITHIN_NOISE:
            return "learning unclear (within noise)"
        return v.status

    def why(self, labels: dict[str, str]) -> str:
        """The verdict's effect, or what stopped it (failed preconditions by their ``labels``)."""
        v = self.verdict
        if v.failed:
            why = verdicts.failed_text([labels.get(p, f"`{p}`") for p in v.failed])
            why += v.detail.removeprefix(verdicts.failed_text([f"`{p}`" for p in v.failed]))  # its numbers
        elif v.status == verdicts.NOT_EVALUABLE:
            why = v.detail
        elif v.status == verdicts.INDICATIVE:
            why = f"{'holds' if v.holds else 'fails'} on its one seed: {v.effect or v.detail}"
        else:
            why = v.effect or v.detail
        return "; ".join([why, *v.dropped, *[self.remedy] * bool(self.remedy), *[v.post_hoc] * bool(v.post_hoc)])

    def short(self) -> str:
        """What REPORT.md's cells say, whole: the effect, or the failed preconditions, or the gate that
        stopped the verdict (its full reason is on the manifest's page)."""
        v = self.verdict
        if v.status == verdicts.NOT_EVALUABLE and not v.failed and v.control:
            short = f"stopped by its {v.control} (the page says why)"
        elif v.status == verdicts.NOT_EVALUABLE and not v.failed:
            short = "its runs are missing or unfinished (the page says which)"
        else:
            return self.why({})
        return "; ".join([short, *[self.remedy] * bool(self.remedy), *[v.post_hoc] * bool(v.post_hoc)])

    def line(self, labels: dict[str, str], scale: bool = False, short: bool = False) -> str:
        """One line: id, verdict, and its effect or what stopped it, written whole (``short``: as
        REPORT.md's lists write it)."""
        kind = (" (cost check)" if self.cost else "") + (f" ({capping.label(self.capped)})" if self.capped else "")
        lead = self.adjusted[0] if self.adjusted else self.status
        adjusted = f" (Holm; unadjusted: {self.status}; BH: {self.adjusted[1]})" if self.adjusted else ""
        head = f"- **{self.id}**{f' ({self.scale})' if scale else ''} — **{lead}**{kind}{adjusted} — "
        held = self.verdict.held if not short and self.verdict.status in verdicts.READING else []
        return head + (self.short() if short else self.why(labels)) + "".join(f"; {h}" for h in held)


def rule_line(confidence: float) -> str:
    """The verdict rule, as the page and REPORT.md state it."""
    return textwrap.fill(f"**Rule:** {verdicts.rule(confidence)}.", 110, break_on_hyphens=False)


def verdict_table(rows: list[tuple[str, str | None, list[ClaimResult]]], scales: list[str]) -> str:
    """Rows (label, link, claim results) by scale: each cell the counts of the :data:`COUNTED` verdicts,
    linked; with more than one row, a first row sums each scale's verdicts over every artefact."""
    used = [s for s in scales if any(r.scale == s for _, _, results in rows for r in results)]
    lines = ["| artefact | " + " | ".join(used) + " |", "|---|" + "---|" * len(used)]
    everything = [r for _, _, results in rows for r in results]
    for label, link, results in [("**every claim**", None, everything)] * (len(rows) > 1) + rows:
        cells = []
        for scale in used:
            judged = [r.counted for r in results if r.scale == scale]
            text = " / ".join(str(judged.count(v)) for v in COUNTED) if judged else "—"
            cells.append(f"[{text}]({link})" if judged and link else text)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
