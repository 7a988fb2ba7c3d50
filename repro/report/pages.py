"""Reports: a manifest's stored runs beside the paper's numbers, its figures, and its claims judged.

``results/reports/<manifest>.md`` (+ ``.csv``) per manifest and ``results/REPORT.md`` over all of them.
Reads only the run store (and the manifest for the paper's reference values and claims).

Like with like: at each scale a report uses only the runs of the manifest's *current* resolution (the
run ids ``repro run NAME --scale S`` would train), one per grid cell, in grid order. Other stored runs
(``--max-steps``, a spec from an older manifest) are listed apart, labelled, and never enter a table,
figure or claim.

Reference values meet runs through ``reference.runs``: a list of ``{match: {key: value}, label, <metric>:
value}``; a run takes the first entry whose ``match`` its grid cell satisfies (keys may be dotted
suffixes, an empty match fits every run) and shows ``paper <metric>`` beside its own ``<metric>``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from repro.claims import gates, power, stats
from repro.claims import verdict as verdicts
from repro.claims.language import ClaimError, is_cost, is_sanity, parse
from repro.claims.select import SEED, seed_means
from repro.claims.stats import CONFIDENCE
from repro.config import lookup
from repro.config.access import NONE, Access
from repro.config.cells import value_text
from repro.config.document import SCALES as SCALE_ORDER
from repro.config.manifest import DEFAULT_SCALE, Manifest, discover
from repro.config.metrics import split_gap
from repro.files import atomic
from repro.files.locks import FileLock
from repro.report import derived, relatives, renderers
from repro.report.renderers import Context, format_value, markdown_table, reference_for, table_csv
from repro.store.runs import scan, short_names, table

COLUMNS = [
    "status",
    "dataset",
    "valid_bits",
    "test_bits",
    "params",
    "flops_per_token",
    "avg_span",
    "seconds_per_step",
    "mfu",
    "peak_memory_bytes",
    "steps",
]
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


PAPERS = ("adaptive_span", "sparse_transformer", "suite", "probe", "pilot")  # REPORT.md's order of papers
KINDS = ("table", "fig")  # then the suite's ablations, by name
HOW = {"corrupt": " (`repro run` redoes it)", "unreadable": " (this user may not read it)"}  # a run left out


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

    @property
    def sanity(self) -> bool:
        """Made only of ``learned[...]``: says the model trained, not what the paper found."""
        return is_sanity(self.check)

    @property
    def cost(self) -> bool:
        """Made only of cost metrics (FLOPs, parameters, memory): a cost check, counted apart from findings."""
        try:
            return not self.sanity and is_cost(self.check)
        except ClaimError:  # a renderer's own verdict: no check in the claim grammar
            return False

    @property
    def counted(self) -> str:
        """The column of the verdict tables this result is counted in (a sanity check, whatever it read, is
        never counted among the findings)."""
        if self.sanity:
            return SANITY
        if self.cost and self.verdict.status != verdicts.NOT_EVALUABLE:
            return COST
        return self.verdict.status

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
        elif v.status == verdicts.NOT_EVALUABLE:
            why = v.detail
        elif v.status == verdicts.INDICATIVE:
            why = f"{'holds' if v.holds else 'fails'} on its one seed: {v.effect or v.detail}"
        else:
            why = v.effect or v.detail
        return why

    def short(self) -> str:
        """What REPORT.md's cells say, whole: the effect, or the failed preconditions, or the gate that
        stopped the verdict (its full reason is on the manifest's page)."""
        v = self.verdict
        if v.status == verdicts.NOT_EVALUABLE and not v.failed and v.control:
            return f"stopped by its {v.control} (the page says why)"
        if v.status == verdicts.NOT_EVALUABLE and not v.failed:
            return "its runs are missing or unfinished (the page says which)"
        return self.why({})

    def line(self, labels: dict[str, str], scale: bool = False, short: bool = False) -> str:
        """One line: id, verdict, and its effect or what stopped it, written whole (``short``: as
        REPORT.md's lists write it)."""
        kind = " (cost check)" if self.cost else ""
        lead = self.adjusted[0] if self.adjusted else self.status
        adjusted = f" (Holm; unadjusted: {self.status}; BH: {self.adjusted[1]})" if self.adjusted else ""
        head = f"- **{self.id}**{f' ({self.scale})' if scale else ''} — **{lead}**{kind}{adjusted} — "
        return head + (self.short() if short else self.why(labels))


def ran_on(manifest: Manifest, runs: pd.DataFrame) -> str:
    """`` — run here on wiki-lead8 (tiny), linux-doc 6.1.192-3 (cpu)``: the corpus each stored scale ran
    on, for a title that names the paper's (a stand-in corpus is never passed off as the paper's)."""
    if runs.empty or "scale" not in runs:
        return ""
    named = [
        f"{renderers.datasets(runs[runs['scale'] == scale])} ({scale})"
        for scale in manifest.scale_names()
        if (runs["scale"] == scale).any()
    ]
    return f" — run here on {', '.join(named)}" if named else ""


def cell_keys(manifest: Manifest, scale: str) -> list[str]:
    return list(manifest.grid_for(scale))


def split_current(manifest: Manifest, scale: str, runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the runs of the manifest's current resolution at ``scale`` in grid order, every stored replicate
    of each cell included, the other stored runs at that scale)."""
    rows = runs[runs["scale"] == scale] if not runs.empty else runs
    stored = int(rows[SEED].nunique()) if not rows.empty and SEED in rows else 1
    order = {spec.run_id: i for i, spec in enumerate(manifest.expand(scale, max(manifest.replicates(scale), stored)))}
    current = rows["run_id"].isin(list(order)) if not rows.empty else pd.Series(dtype=bool)
    ordered = rows[current]
    ordered = ordered.iloc[ordered["run_id"].map(order).argsort()] if not ordered.empty else ordered
    return ordered.reset_index(drop=True), rows[~current]


def current_runs(manifest: Manifest, root: Path) -> pd.DataFrame:
    """The tidy table of a manifest's current runs at every stored scale, one row per grid cell (seed means)."""
    runs = table(root, manifest.name)
    frames = (
        [seed_means(split_current(manifest, s, runs)[0], cell_keys(manifest, s)) for s in manifest.scale_names()]
        if not runs.empty
        else []
    )
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else runs.iloc[0:0]


def context(manifest: Manifest, root: Path, scale: str) -> Context:
    """What a manifest's renderers get at ``scale`` (``none``: a manifest that trains nothing)."""
    runs = table(root, manifest.name)
    rows = split_current(manifest, scale, runs)[0] if scale != "none" and not runs.empty else runs.iloc[0:0]
    return Context(manifest, seed_means(rows, cell_keys(manifest, scale)), scale, root, _parts(manifest, root), rows)


def _parts(manifest: Manifest, root: Path) -> dict[str, tuple[Manifest, pd.DataFrame]]:
    out = {}
    for name in manifest.parts:
        part = lookup.part(manifest, name)
        out[name] = (part, current_runs(part, root))
    return out


@contextlib.contextmanager
def writing(root: Path) -> Iterator[None]:
    """Hold the reports folder's lock (reports of one store wait for each other) and remove the temp
    files a killed report left there (its files are atomic: a kill leaves only those)."""
    out_dir = root / "reports"
    with FileLock(out_dir / ".lock", wait=True):
        for folder in (out_dir, out_dir / "figures", out_dir / "tables"):
            atomic.clean_temps(folder)
        yield


def render(manifest: Manifest, root: Path, confidence: float = CONFIDENCE) -> tuple[Path, list[ClaimResult]]:
    """Write the manifest's report; returns its path and the claims judged at every stored scale."""
    with writing(root):
        return _render(manifest, root, confidence)


def _render(manifest: Manifest, root: Path, confidence: float) -> tuple[Path, list[ClaimResult]]:
    runs, left = scan(root, manifest.name)
    out_dir = root / "reports"
    lines = [
        f"# {manifest.title}{ran_on(manifest, runs)}",
        "",
        f"Manifest `{manifest.name}` ({manifest.path.name}), paper `{manifest.paper}`.",
        "",
    ]
    lines += [f"- {out.kind} run, left out{HOW[out.kind]}: {out.why}" for out in left] + [""] * bool(left)
    lines += derived_note(manifest)
    if manifest.description:
        lines += [manifest.description.strip(), ""]
    results: list[ClaimResult] = []
    if manifest.base is None:  # trains nothing: the renderers draw from the manifest (and its parts)
        lines += [
            "This artefact needs no training."
            if not manifest.parts
            else f"Gathered from the stored runs of {', '.join(f'`{p}`' for p in manifest.parts)}.",
            "",
        ]
        for path, caption in renderers.render_all(context(manifest, root, "none")):
            lines += _embed(path, caption, out_dir)
    elif runs.empty:
        first = DEFAULT_SCALE if DEFAULT_SCALE in manifest.scale_names() else manifest.scale_names()[0]
        lines += [f"No stored runs yet: `repro run {manifest.command} --scale {first}`.", ""]
        lines += relatives.elsewhere(manifest, root)
    csv_frames = []
    for scale in [s for s in manifest.scale_names() if not runs.empty and s in set(runs["scale"])]:
        rows, others = split_current(manifest, scale, runs)
        keys = cell_keys(manifest, scale)
        cells = seed_means(rows, keys)  # one row per grid cell: the table's and the renderers'
        extra = renderers.claim_metrics(manifest, scale)  # what the claims compare and no renderer shows
        frame = _table(manifest, cells, keys, spread=True, extra=extra)
        csv_frames.append(_table(manifest, rows, keys, extra=extra).assign(scale=scale))
        fill = f"`repro run {manifest.command} --scale {scale}`"
        lines += [
            f"## Scale `{scale}` — dataset: {renderers.datasets(rows)}"
            if not rows.empty
            else f"## Scale `{scale}` — no run of the current resolution stored",
            "",
            SCALE_NOTE.get(scale, f"**Scale: {scale}**"),
            "",
        ]
        if not rows.empty:
            lines += [evaluation_note(rows), ""]
        lines += [f"- left out: {why}" for _, why in manifest.left_out(scale)] + [""] * bool(manifest.left_out(scale))
        lines += [
            markdown_table(frame)
            if not rows.empty
            else f"None of the {len(manifest.expand(scale))} run(s) of the current resolution is stored: {fill} "
            f"trains them; then `repro report {manifest.command}` fills this section.",
            "",
        ]
        lines += _split_gaps(cells)
        if not others.empty:
            lines += [
                f"Other stored runs at this scale ({len(others)}), **not used** in the tables, figures or "
                "claims above: their spec differs from the manifest's current resolution (a `--max-steps` "
                "run, or a spec from an older version of the manifest or code).",
                "",
                markdown_table(_table(manifest, others, keys, extra=extra).assign(run_id=list(others["run_id"]))),
                "",
            ]
        drawn = Context(manifest, cells, scale, root, replicates=rows)
        figures = renderers.render_all(drawn) if not rows.empty else []
        for path, caption in figures:
            lines += _embed(path, caption, out_dir)
        judged = [c for c in manifest.claims if c.scales is None or scale in c.scales]
        if judged or drawn.judged:
            lines += [f"### Claims at scale `{scale}`", ""]
            named = {m for c in judged for check in (*c.requires, *c.controls, c.check) for m, _ in parse(check)[1]}
            named |= {"code_version"}  # the provenance gate's
            judged_rows = derived.add(rows, root, manifest.name, named)
            scale_results, block = _claims_at(manifest, scale, judged, judged_rows, keys, fill, confidence, root)
            for claim_id, text, verdict in drawn.judged:  # a renderer's own verdicts, counted with the claims
                scale_results.append(
                    ClaimResult(manifest.name, scale, claim_id, text, "(renderer)", verdict, corpus(rows))
                )
                block.insert(-1, scale_results[-1].line({}))
            results += scale_results
            lines += block
        lines.append("")
    if manifest.notes and (manifest.set or manifest.sweep):  # a derived manifest's notes are its base's
        lines += [f"## Notes of `{manifest.path.name}`", "", _BASE_NOTES, "", *_quoted(manifest.notes), ""]
    elif manifest.notes:
        lines += _notes(manifest)
    if manifest.claims:
        lines[4:4] = _claims_defined(manifest)
    if results:
        summary = verdict_table([(f"`{manifest.name}`", None, results)], manifest.scale_names())
        lines[4:4] = [f"Verdicts per scale ({' / '.join(COUNTED)}).", "", rule_line(confidence), "", summary, ""]
    path = out_dir / f"{manifest.name}.md"
    atomic.write_text(path, "\n".join(lines))
    if csv_frames:
        atomic.write_text(out_dir / f"{manifest.name}.csv", pd.concat(csv_frames).to_csv(index=False))
    if results:
        atomic.write_text(out_dir / "tables" / f"{manifest.name}-claims.csv", claims_csv(results))
    return path, results


COST = "cost check"
# apart from the findings: sanity checks (the model learned) that held, and cost checks (FLOPs, memory)
SANITY = "sanity check"
COUNTED = (*verdicts.VERDICTS, SANITY, COST)


def rule_line(confidence: float) -> str:
    return textwrap.fill(f"**Rule:** {verdicts.rule(confidence)}.", 110, break_on_hyphens=False)


def _claims_defined(manifest: Manifest) -> list[str]:
    """The claims once, text and check, and where their full numbers are."""
    lines = ["## Claims", ""]
    for claim in manifest.claims:
        lines += [f"- **{claim.id}**: {claim.text}", f"  `{claim.check}`"]
    csv = f"tables/{manifest.name}-claims.csv"
    return [
        *lines,
        "",
        f"Each verdict's full numbers (every selection's mean ± sd, every cell's margin): [{csv}]({csv}).",
        "",
    ]


def _claims_at(
    manifest: Manifest,
    scale: str,
    judged: list,
    rows: pd.DataFrame,
    keys: list[str],
    fill: str,
    confidence: float,
    root: Path,
) -> tuple[list[ClaimResult], list[str]]:
    """The claims judged at one scale: their preconditions in a table, once, then a line per claim."""
    pre = list(dict.fromkeys(p for c in judged for p in c.requires if p != c.check))
    labels = {p: f"P{i + 1}" for i, p in enumerate(pre)}
    lines: list[str] = []
    if pre and not rows.empty:
        lines += [
            "Preconditions, each on every seed (*learned*: bits below 0.8 x the unigram bits):",
            "",
            "| | precondition | | values |",
            "|---|---|---|---|",
        ]
        for p in pre:
            v = gates.precondition(p, rows, keys)
            held = {verdicts.REPRODUCED: "holds", verdicts.NOT_REPRODUCED: "fails"}.get(v.status, "not evaluable")
            lines.append(f"| {labels[p]} | `{p}` | {held} | {v.detail} |")
        lines.append("")
    results = []
    for claim in judged:
        sesoi = claim.sesoi if claim.sesoi is not None else power.default_sesoi(claim.check)
        verdict = (
            gates.evaluate(
                claim.check,
                rows,
                keys,
                claim.requires,
                confidence,
                controls=claim.controls,
                sesoi=sesoi,
                curves=derived.curves(root, manifest.name),
                same_code=derived.same_code,
            )
            if not rows.empty
            else verdicts.Verdict(verdicts.NOT_EVALUABLE, f"no run of the current resolution is stored: {fill}")
        )
        result = ClaimResult(manifest.name, scale, claim.id, claim.text, claim.check, verdict, corpus(rows))
        results.append(result)
        lines.append(result.line(labels))
    return results, [*lines, ""]


def corpus(rows: pd.DataFrame) -> str:
    """The corpus of these runs and the unit their bits are per: ``linux-doc 6.1.192-3 (bits per byte)``."""
    if rows.empty:
        return ""
    units = sorted({str(u) for u in rows.get("dataset_unit", pd.Series(dtype=object)).dropna()})
    return renderers.datasets(rows) + (f" (bits per {', '.join(units)})" if units else "")


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
                "mde": r.verdict.decided.mde if r.verdict.decided else math.nan,
                "uninformative": r.verdict.uninformative,
                "effect": r.verdict.effect,
                "failed preconditions": "; ".join(r.verdict.failed),
                "gate": r.verdict.control or "",
                "held": "; ".join(r.verdict.held),
                "detail": r.verdict.detail,
                "check": r.check,
            }
            for r in results
        ]
    )
    return frame.to_csv(index=False)


_BASE_NOTES = (
    "Written for that file's own settings, not for the overrides above: where they name a value the "
    "overrides changed (a step count, an R, a scale's recipe), the tables and claims of this report are the "
    "measured truth."
)


_INCLUDED_NOTES = (
    "Written for the manifests that include that file (its recipe's choices), not for this one: where this "
    "manifest sets other values, its own keys and the tables and claims of this report are the measured truth."
)


def _split_gaps(cells: pd.DataFrame) -> list[str]:
    """A line under a scale's table where a cell's valid and test bits (seed means) lie far apart
    (:func:`repro.config.metrics.split_gap`): the widest, and in how many cells."""
    if cells.empty or not {"valid_bits", "test_bits"} <= set(cells):
        return []
    said = [
        (abs(v - t), gap)
        for v, t in zip(cells["valid_bits"], cells["test_bits"])
        if (gap := split_gap(None if _missing(v) else v, None if _missing(t) else t))
    ]
    if not said:
        return []
    widest = max(said)[1]
    return [f"**Valid against test** ({len(said)} of {len(cells)} cells), the widest gap: {widest}.", ""]


def _notes(manifest: Manifest) -> list[str]:
    """A manifest's own notes, then each included file's apart, quoted under the file's name (a user's
    manifest that includes a shipped recipe does not present the recipe's notes as its own)."""
    here = manifest.path.resolve()
    by_file = manifest.notes_from or [(here, manifest.notes)]  # a manifest built without its files': its own
    own = [text for path, text in by_file if path == here]
    lines = ["## Notes", "", *[text.strip() for text in own], ""] if own else []
    for path, text in by_file:
        if path != here:
            shown = os.path.relpath(path, here.parent)
            lines += [f"## Notes of the included `{shown}`", "", _INCLUDED_NOTES, "", *_quoted(text), ""]
    return lines


def _quoted(text: str) -> list[str]:
    """Text as a markdown quote, line by line."""
    return [f"> {line}".rstrip() for line in text.strip().splitlines()]


def derived_note(manifest: Manifest) -> list[str]:
    """What a manifest derived by overrides is (``-m``/``KEY=VALUE`` on the command line, or a saved file
    that ``include:``s another with ``set``/``sweep``): the lines that open its report."""
    if not (manifest.set or manifest.sweep):
        return []
    changes = " ".join(f"{k}={value_text(v)}" for k, v in {**manifest.set, **manifest.sweep}.items())
    return [
        f"**Derived** from `{manifest.path.name}` with `{changes}` ({'sweeps: grid axes' if manifest.sweep else 'set in every run'}): "
        f"its runs are stored apart, under `runs/{manifest.name}/`, and only they enter the tables, figures and "
        f"claims below. The description and notes are the file's, written for its own settings.",
        "",
    ]


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


def evaluation_note(rows: pd.DataFrame) -> str:
    """How the runs' bits were scored, once per distinct procedure (the procedure moves the bits a little)."""
    phrases: list[str] = []
    finished = rows[rows["status"] == "finished"] if "status" in rows else rows
    for _, row in (finished if not finished.empty else rows).iterrows():
        phrase = _procedure(row)
        if phrase not in phrases:
            phrases.append(phrase)
    return "Evaluation: " + "; ".join(phrases) + "."


def _procedure(row: pd.Series) -> str:
    procedure = row.get("eval_procedure")
    if _missing(procedure):
        return "no split scored"
    if procedure == "stream":
        text = (
            f"each split read as {int(row['eval.batch_size'])} contiguous streams, block by block, carrying "
            f"the model's cache; every target scored once"
        )
    elif procedure == "official":
        prefix = row.get("eval_prefix")
        return (
            f"the authors' released weights, not trained here; dev and test bits by the official protocol "
            f"(`--full-eval-mode --batch-sz 8`: 8 contiguous streams, the mean of the blocks' mean losses, each "
            f"stream's last partial block unscored), the suite's {int(row['eval.batch_size'])} streams beside them"
            + (f"; only the first {int(prefix):,} tokens of each split" if not _missing(prefix) and prefix else "")
        )
    elif procedure == "windows":
        text = (
            f"windows of {int(row['data.block'])} tokens advancing by {int(row['data.block'] - row['eval_min_context'])}; "
            f"every target scored once, with at least {int(row['eval_min_context'])} tokens of context"
        )
    else:
        text = "whole sequences after a start token; every element scored"
    if row.get("selected") == "best_valid":
        return text + (
            f"; the weights of the best quick validation (step {int(row['selected_step'])}) scored, not the last"
        )
    return text + "; the last weights scored"


def _embed(path: Path, caption: str, out_dir: Path) -> list[str]:
    """Report lines for a renderer's file: a table inlined (its headings under the section's), a figure
    embedded, anything else linked."""
    if path.suffix == ".md":
        table_md = re.sub(
            r"^(#+) ",
            lambda m: "#" * min(len(m.group(1)) + 3, 6) + " ",
            path.read_text(encoding="utf-8").strip(),
            flags=re.M,
        )
        return [
            table_md,
            "",
            f"([{path.name}]({path.relative_to(out_dir)}), [csv]({table_csv(path).relative_to(out_dir)}))",
            "",
        ]
    if path.suffix in (".png", ".svg", ".jpg", ".jpeg", ".gif"):
        return [f"![{caption}]({path.relative_to(out_dir)})", "", f"*{caption}*", ""]
    return [f"[{caption}]({path.relative_to(out_dir)})", ""]


def _table(
    manifest: Manifest, rows: pd.DataFrame, keys: list[str], spread: bool = False, extra: list[str] = ()
) -> pd.DataFrame:
    """One row per run (the csv, each seed apart) or, with ``spread``, per grid cell from the seed means of
    :func:`seed_means`: ``mean ± sd`` over its seeds and their number ``n``; the paper's values beside.
    ``extra``: metrics shown after :data:`COLUMNS` (:func:`repro.report.renderers.claim_metrics`)."""
    names = short_names(keys)
    out = []
    for _, row in rows.iterrows():
        cell = {k: row[k] for k in keys if k in row}
        record = {names[k]: value_text(v) if isinstance(v, (dict, list)) else v for k, v in cell.items()}
        if not spread and SEED in row:
            record["seed"] = row[SEED]
        for c in [*COLUMNS, *(m for m in extra if m not in COLUMNS)]:
            if c not in row or _missing(row[c]):
                continue
            sd = row.get(f"{c} sd")
            record[c] = row[c] if _missing(sd) or sd == 0 else f"{format_value(row[c])} ± {format_value(sd, 2)}"
        if spread:
            record["n"] = int(row["seeds"])
        reference = reference_for(manifest, cell)
        if "label" in reference:
            record["paper row"] = reference.pop("label")
        reference.pop("prior", None)  # a prior-work row: the dashboard draws no bar for it, the table no column
        record.update({f"paper {k}": v for k, v in reference.items()})
        out.append(record)
    return pd.DataFrame(out)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def stored_line(manifest: Manifest, root: Path) -> str:
    """``runs stored at: tiny, cpu``; a gathering manifest's are its parts' (it trains none itself)."""
    names = manifest.parts if manifest.base is None and manifest.parts else [manifest.name]
    scales = sorted({s for name in names for s in set(table(root, name).get("scale", []))})
    where = (
        "runs stored at"
        if names == [manifest.name]
        else f"gathers {', '.join(f'`{n}`' for n in names)}; their runs stored at"
    )
    return f"{where}: {', '.join(scales) or 'no runs'}"


def render_all(root: Path, confidence: float = CONFIDENCE, access: Access = NONE) -> Path:
    """Every manifest's report plus ``REPORT.md``: the papers' artefacts in their order, each row's headline
    claim with its effect, the verdict counts, then each artefact's claims a line each (``access``: the
    folders the user allowed the manifests beyond their own)."""
    with writing(root):
        return _render_all(root, confidence, access)


def multiplicity(results: list[ClaimResult], alpha: float, papers: dict[str, str]) -> str:
    """Adjust the t-judged findings among ``results`` for their number, in families of one paper at one
    scale (``papers``: manifest -> paper), each test fed its two-sided p (the direction is read from the
    data) and counted once over distinct sets of computations (the same runs stored under two ids, e.g. the
    frontier's fixed and st-table2's, are one test), setting each one's ``adjusted`` (Holm's and
    Benjamini-Hochberg's verdicts); returns REPORT.md's paragraph saying so."""
    judged = [
        r
        for r in results
        if r.verdict.seeds >= 2
        and r.verdict.status in (verdicts.REPRODUCED, verdicts.NOT_REPRODUCED, verdicts.WITHIN_NOISE)
        and not (r.sanity or r.cost)
        and r.verdict.decided is not None  # judged by t: a margin measured (not an exact or bare truth)
        and not math.isnan(r.verdict.p_two_sided)
    ]

    def key(r: ClaimResult) -> tuple:
        return (r.verdict.computed or r.verdict.runs or (r.manifest, r.scale, r.id), round(r.verdict.decided.mean, 6))

    families: dict[tuple[str, str], dict[tuple, float]] = {}
    seen: set[tuple] = set()
    for r in judged:  # a test reported twice (by two manifests) counts once, in the family that reports it first
        if key(r) not in seen:
            seen.add(key(r))
            families.setdefault((papers.get(r.manifest, "?"), r.scale), {})[key(r)] = r.verdict.p_two_sided
    kept = {}
    for tests in families.values():
        holm, bh = stats.adjusted(list(tests.values()), alpha)
        kept |= {k: (h, b) for k, h, b in zip(tests, holm, bh)}
    for r in judged:
        h, b = kept[key(r)]
        found = r.verdict.status != verdicts.WITHIN_NOISE
        r.adjusted = tuple(r.verdict.status if found and ok else verdicts.WITHIN_NOISE for ok in (h, b))
    findings = [r for r in judged if r.verdict.status != verdicts.WITHIN_NOISE]
    directional = sum(1 for r in judged if r.verdict.decided.band is None)
    bands = len(judged) - directional
    sizes = ", ".join(f"{paper} {scale}: {len(tests)}" for (paper, scale), tests in sorted(families.items()))
    return (
        f"**Multiplicity:** {len(judged)} findings are judged by the t rule (sanity and cost checks apart), "
        f"{sum(len(t) for t in families.values())} distinct tests once verdicts on the same runs and margin are "
        f"counted once, in families of one paper at one scale ({sizes}). A directional verdict at {alpha:.0%} per "
        f"tail reads a zero effect as a finding {2 * alpha:.0%} of the time: its {directional} directional tests "
        f"alone expect {2 * alpha * directional:.1f} false readings were no effect real, its {bands} bands "
        f"{alpha * bands:.1f}. Each family is adjusted on the tests' two-sided p values: *Holm* (family-wise error "
        f"at {alpha:.0%}) and *BH* (Benjamini-Hochberg, false discovery rate at {alpha:.0%}); the verdict columns "
        f"lead with Holm's. Of the {len(findings)} findings, {sum(r.adjusted[0] == r.verdict.status for r in findings)} "
        f"survive Holm and {sum(r.adjusted[1] == r.verdict.status for r in findings)} survive BH. The seeds vary "
        f"the initialisation only (one data order, one test split): the intervals speak for that variation alone. "
        f"The claims csvs give each verdict's sign-flip permutation p beside its t p."
    )


VERDICTS_JSON = "verdicts.json"  # reports/: every claim's verdict at the last regeneration, as data
MOVED_PAGE = "moved.md"  # reports/: the verdicts that moved at the last regeneration that moved any
CLAIMS_PAGE = "claims.md"  # reports/: every claim of every artefact, a line each (REPORT.md keeps the headlines)


def stored_verdicts(root: Path) -> dict[tuple[str, str, str], str]:
    """(manifest, scale, claim) -> verdict, as the last regeneration stored them (``reports/verdicts.json``;
    before there was one, the claims csvs)."""
    try:
        stored = json.loads((root / "reports" / VERDICTS_JSON).read_text(encoding="utf-8"))
        return {tuple(k.split("\x1f")): str(v["verdict"]) for k, v in stored.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    out = {}
    for path in sorted((root / "reports" / "tables").glob("*-claims.csv")):
        try:
            frame = pd.read_csv(path)
        except (OSError, ValueError, pd.errors.ParserError):
            continue
        name = path.name.removesuffix("-claims.csv")
        for _, row in frame.iterrows():
            out[(name, str(row["scale"]), str(row["claim"]))] = str(row["verdict"])
    return out


def verdicts_json(results: list[ClaimResult]) -> str:
    """Every claim's verdict as data (what the next regeneration compares with), in report order."""
    data = {
        "\x1f".join((r.manifest, r.scale, r.id)): {
            "verdict": r.status,
            "gate": r.verdict.control or "",
            "effect": r.short(),
        }
        for r in results
    }
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def moved_verdicts(before: dict[tuple[str, str, str], str], results: list[ClaimResult]) -> list[str]:
    """The page of the verdicts this regeneration changed: before -> after, with the reason, one line each
    (empty: none moved)."""
    after = {(r.manifest, r.scale, r.id): r for r in results}
    changed = [
        (k, before.get(k, "—"), after[k].status if k in after else "—", after[k].short() if k in after else "")
        for k in [*after, *[k for k in before if k not in after]]
        if before and before.get(k) != (after[k].status if k in after else None)
    ]
    if not changed:
        return []
    lines = [f"# Verdicts that moved at the last regeneration that moved any ({len(changed)})", ""]
    lines += [
        f"- {m} ({s}) **{c}**: {old} -> **{new}**{f' — {why}' if why else ''}" for (m, s, c), old, new, why in changed
    ]
    return [*lines, ""]


def paper_order(manifest: Manifest) -> tuple:
    """REPORT.md's order: the papers, then within each its tables, its figures (by number), the suite's
    ablations and the rest by name; pilots last."""
    paper = PAPERS.index(manifest.paper) if manifest.paper in PAPERS else len(PAPERS) - 1
    found = re.search(r"-(table|fig)(\d+)", manifest.name)
    kind = KINDS.index(found.group(1)) if found else len(KINDS)
    return (paper, kind, int(found.group(2)) if found else 0, manifest.name)


def headline(manifest: Manifest, results: list[ClaimResult]) -> ClaimResult | None:
    """The claim a row of REPORT.md's first table shows: the manifest's ``headline``, else its first finding
    (a claim other than "the model learned"), else its first claim."""
    named = [r for r in results if r.id == manifest.headline]
    return (named or [r for r in results if not r.sanity] or results or [None])[0]


def _render_all(root: Path, confidence: float, access: Access) -> Path:
    manifests = sorted((renderers.check_loaded(lookup.load(p, access)) for p in discover().values()), key=paper_order)
    sections: dict[str, list[str]] = {}
    summary: list[tuple[str, str | None, list[ClaimResult]]] = []
    heads = [
        "| artefact | scale | corpus (unit) | headline claim | verdict (Holm) | unadjusted / BH | effect: margin [bounds], seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    seen: list[str] = []
    before = stored_verdicts(root)
    rendered = [(manifest, *_render(manifest, root, confidence)) for manifest in manifests]
    everything = [r for _, _, results in rendered for r in results]
    family = multiplicity(everything, 1 - confidence, {m.name: m.paper for m in manifests})
    for manifest, path, results in rendered:
        link = f"reports/{path.name}"
        if results:
            summary.append((f"[{manifest.name}]({link})", None, results))
            seen += [s for s in manifest.scale_names() if s not in seen]
        for scale in [s for s in manifest.scale_names() if any(r.scale == s for r in results)]:
            top = headline(manifest, [r for r in results if r.scale == scale])
            lead = top.adjusted[0] if top.adjusted else top.status
            beside = f"{top.status} / {top.adjusted[1]}" if top.adjusted else "—"
            heads.append(
                f"| [{manifest.name}]({link}) | {scale} | {top.data or '?'} | {top.id} | {lead}"
                f"{' (cost check)' if top.cost else ''} | {beside} "
                f"| {top.short()} |"
            )
        block = sections.setdefault(manifest.paper, [])
        title = f"{manifest.title}{ran_on(manifest, table(root, manifest.name))}"
        block += [f"### [{title}]({link})", "", f"`{manifest.name}` — {stored_line(manifest, root)}", ""]
        block += [r.line({}, scale=True, short=True) for r in results]
        block.append("")
    intro = (
        "Generated by `repro report --all` from the run store. Every number is labelled with its scale; `tiny` "
        "and `cpu` results come from 2-CPU runs on offline stand-in corpora and are not the papers' numbers. "
        "A claim is *not evaluable* when a precondition fails (a model did not learn the data), a control is "
        "not reproduced (the spans did not grow), its margin flips along the training curves, or its runs' code "
        "could differ in bits (trained from uncommitted code, or arms trained at commits whose model, data or "
        "training code differ: retrain them at one commit); sanity checks (the model learned) are counted apart "
        "from the papers' findings. The `probe` rows are synthetic mechanism checks with known answers "
        "(docs/probes.md), never the papers' numbers; the `pilot` rows are the measured search for the `cpu` scale "
        "(studies/cpu-scale.md)."
    )
    lines = [
        "# Results",
        "",
        textwrap.fill(intro, 110, break_on_hyphens=False),
        "",
        rule_line(confidence),
        "",
        textwrap.fill(family, 110, break_on_hyphens=False),
        "",
        "## Headlines, in the papers' order",
        "",
        *heads,
        "",
        f"## Verdicts per scale ({' / '.join(COUNTED)})",
        "",
        verdict_table(summary, [s for s in SCALE_ORDER if s in seen] + [s for s in seen if s not in SCALE_ORDER]),
        "",
        f"The verdicts that moved at the last regeneration that moved any: [reports/{MOVED_PAGE}](reports/{MOVED_PAGE}); "
        f"every verdict as data: [reports/{VERDICTS_JSON}](reports/{VERDICTS_JSON}).",
        "",
    ]
    moved = moved_verdicts(before, everything)
    if moved:  # none moved: the page stays as it was, so an unchanged store regenerates byte for byte
        atomic.write_text(root / "reports" / MOVED_PAGE, "\n".join(moved))
    atomic.write_text(root / "reports" / VERDICTS_JSON, verdicts_json(everything))
    claims = [
        "# Every claim, by artefact",
        "",
        "Each artefact's claims at every stored scale, one line each (`repro report --all`).",
        "",
    ]
    for paper in sorted(sections, key=lambda p: PAPERS.index(p) if p in PAPERS else len(PAPERS)):
        claims += [f"## {paper}", "", *[line.replace("](reports/", "](") for line in sections[paper]]]
    atomic.write_text(root / "reports" / CLAIMS_PAGE, "\n".join(claims))
    lines += [f"Every claim of every artefact, one line each: [reports/{CLAIMS_PAGE}](reports/{CLAIMS_PAGE}).", ""]
    path = root / "REPORT.md"
    atomic.write_text(path, "\n".join(lines))
    return path
