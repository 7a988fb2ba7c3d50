"""A manifest's report assembled from the run store: its :class:`~repro.report.content.Report`, built once
(seed means, tables, the renderers' figures, the claims judged), for :mod:`repro.report.page` and
:mod:`repro.report.overview` to write.

Like with like: at each scale a report uses only the runs of the manifest's *current* resolution (the
run ids ``repro run NAME --scale S`` would train), one per grid cell, in grid order. Other stored runs
(``--max-steps``, a spec from an older manifest) are listed apart, labelled, and never enter a table,
figure or claim. Each check of the manifest's claims is parsed once here and handed on parsed.

Reference values meet runs through ``reference.runs``: a list of ``{match: {key: value}, label, <metric>:
value}``; a run takes the first entry whose ``match`` its grid cell satisfies (keys may be dotted
suffixes, an empty match fits every run) and shows ``paper <metric>`` beside its own ``<metric>``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from repro.claims import design, gates, power, registration
from repro.claims import verdict as verdicts
from repro.claims.select import SEED, seed_means
from repro.config import capped as capping
from repro.config import lookup
from repro.config import manifest as manifests
from repro.config.cells import value_text
from repro.config.manifest import DEFAULT_SCALE, Manifest
from repro.errors import UserError
from repro.grammar import language
from repro.report import cost, derived, frames, relatives, renderers
from repro.report.content import Note, Precondition, Report, Section, Shown
from repro.report.renderers import Context, table_csv
from repro.report.results import ClaimResult
from repro.store.runs import scan, table

HELD = {verdicts.REPRODUCED: "holds", verdicts.NOT_REPRODUCED: "fails"}  # a precondition's word (else: not evaluable)


def assemble(manifest: Manifest, root: Path, confidence: float, capped: int | None = None) -> Report:
    """``manifest``'s report from the store under ``root`` (the renderers write their files meanwhile);
    ``capped``: of its runs capped at that many steps (``repro run --max-steps``) instead, a page of its own
    (``<name>-capped<N>.md``) that says so in its title, each scale's heading, figure and claims."""
    runs, left = scan(root, manifest.name)
    written = dict.fromkeys(t for c in manifest.claims for t in (c.check, *c.requires, *c.controls))
    checks = {t: language.compiled(t) for t in written}  # each parsed once, handed on parsed
    changes = {**manifest.set, **manifest.sweep}
    report = Report(
        name=manifest.name if capped is None else f"{manifest.name}-capped{capped}",
        title=f"{manifest.title}{ran_on(manifest, runs)}" + (f" — {capping.label(capped).upper()}" if capped else ""),
        file=manifest.path.name,
        paper=manifest.paper,
        command=manifest.command,
        scales=manifest.scale_names(),
        confidence=confidence,
        left=[(out.kind, out.why) for out in left],
        overrides=" ".join(f"{k}={value_text(v)}" for k, v in changes.items()),
        sweeps=bool(manifest.sweep),
        description=manifest.description,
        claims=[(c.id, c.text, c.check) for c in manifest.claims],
        trains=manifest.base is not None,
        parts=list(manifest.parts),
        notes=_notes(manifest),
        headline=manifest.headline,
        stored=_stored(manifest, root, runs),
    )
    if manifest.base is None:  # trains nothing: the renderers draw from the manifest (and its parts)
        report.figures = _shown(renderers.render_all(context(manifest, root, "none")), root)
    elif runs.empty:
        report.unstored = DEFAULT_SCALE if DEFAULT_SCALE in manifest.scale_names() else manifest.scale_names()[0]
        report.elsewhere = relatives.elsewhere(manifest, root)
    stored = set(runs["scale"]) if not runs.empty else set()
    report.sections = [
        _section(manifest, root, scale, runs, checks, confidence, capped)
        for scale in manifest.scale_names()
        if scale in stored
    ]
    return report


def _section(
    manifest: Manifest,
    root: Path,
    scale: str,
    runs: pd.DataFrame,
    checks: dict,
    confidence: float,
    capped: int | None = None,
) -> Section:
    """One scale: its current runs tabulated, the others apart, the figures drawn, the claims judged."""
    rows, others = split_current(manifest, scale, runs, capped)
    keys = cell_keys(manifest, scale)
    cells = seed_means(rows, keys)  # one row per grid cell: the table's and the renderers'
    judged = [c for c in manifest.claims if c.scales is None or scale in c.scales]
    extra = renderers.claim_metrics(manifest, [checks[c.check] for c in judged])  # what no renderer shows
    section = Section(
        scale,
        dataset=renderers.datasets(rows) if not rows.empty else "",
        expected=len(manifest.expand(scale)),
        evaluation=frames.evaluation(rows) if not rows.empty else [],
        left_out=[why for _, why in manifest.left_out(scale)],
        table=frames.run_table(manifest, cells, keys, spread=True, extra=extra, replicates=rows)
        if not rows.empty
        else None,
        runs=frames.run_table(manifest, rows, keys, extra=extra).assign(scale=scale),
        gaps=frames.split_gaps(cells),
        capped=capped,
    )
    if not others.empty:
        section.others = frames.run_table(manifest, others, keys, extra=extra).assign(run_id=list(others["run_id"]))
    drawn = Context(manifest, cells, scale, root, replicates=rows, capped=capped)
    section.figures = _shown(renderers.render_all(drawn), root) if not rows.empty else []
    section.judges = bool(judged or drawn.judged)
    if section.judges:
        named = {m for c in judged for t in (*c.requires, *c.controls, c.check) for m, _ in checks[t].selections}
        rows = derived.add(rows, root, manifest.name, named | {"code_version", "digest"})  # the provenance gate's
        section.preconditions, section.claims = _claims(
            manifest, root, scale, judged, rows, keys, checks, confidence, capped
        )
        section.drawn = [
            ClaimResult(manifest.name, scale, claim_id, text, "(renderer)", verdict, corpus(rows), capped=capped)
            for claim_id, text, verdict in drawn.judged
        ]
    return section


def _claims(
    manifest: Manifest,
    root: Path,
    scale: str,
    judged: list,
    rows: pd.DataFrame,
    keys: list[str],
    checks: dict[str, language.Check],
    confidence: float,
    capped: int | None = None,
) -> tuple[list[Precondition], list[ClaimResult]]:
    """The claims judged at one scale, and their preconditions in a table, once (labelled ``P1``...)."""
    bound = {c.id: [power.bound(p, _level(c, checks)) for p in c.requires] for c in judged}  # `sesoi` named
    pre = list(dict.fromkeys(p for c in judged for p in bound[c.id] if p != c.check))
    preconditions = [
        Precondition(f"P{i + 1}", p, HELD.get(v.status, "not evaluable"), v.detail)
        for i, p in enumerate(pre)
        if not rows.empty
        for v in [gates.precondition(checks.get(p) or language.compiled(p), rows, keys)]
    ]
    curves, computes = derived.curves(root, manifest.name), derived.computes(root, manifest.name)
    history, today = registration.History(root), _designs(manifest, scale)
    fill = f"no run of the current resolution is stored: `repro run {manifest.command} --scale {scale}`"
    results = []
    for claim in judged:
        check = checks[claim.check]
        verdict = (
            gates.evaluate(
                check,
                rows,
                keys,
                [checks[p] for p in claim.requires],
                confidence,
                controls=[checks[c] for c in claim.controls],
                sesoi=claim.sesoi if claim.sesoi is not None else math.nan,  # a band's: its half-width
                curves=curves,
                computes=computes,
                looks=manifest.looks(scale),
            )
            if not rows.empty
            else verdicts.Verdict(verdicts.NOT_EVALUABLE, fill)
        )
        verdict.covers = cost.covers(rows, manifest.split) if not rows.empty else ""
        ran = verdict.runs or frozenset(rows["run_id"]) if not rows.empty else frozenset()
        if claim.id in today and ran:  # judged under the design its first run registered, or labelled
            first = history.first(manifest.path, manifest.name, scale, ran)
            verdict.post_hoc = registration.post_hoc(today[claim.id], claim.id, first)
        result = ClaimResult(
            manifest.name,
            scale,
            claim.id,
            claim.text,
            claim.check,
            verdict,
            corpus(rows),
            kind=check.kind,
            capped=capped,
        )
        result.remedy = cost.remedy(verdict, manifest, scale, rows)
        results.append(result)
    return preconditions, results


def _level(claim, checks: dict[str, language.Check]) -> float:
    """A claim's smallest effect of interest, as its premises' ``sesoi`` names it."""
    return power.of_claim(checks[claim.check], claim.sesoi if claim.sesoi is not None else math.nan)


def _designs(manifest: Manifest, scale: str) -> dict[str, dict]:
    """Each claim's design at ``scale`` as its manifest file is written now (none where it cannot be read)."""
    try:
        return design.of_document(manifests.read(manifest.path), scale)
    except UserError:
        return {}


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


def split_current(
    manifest: Manifest, scale: str, runs: pd.DataFrame, capped: int | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the runs of the manifest's current resolution at ``scale`` in grid order, every stored replicate
    of each cell included, the other stored runs at that scale); ``capped``: those runs capped at that
    many steps (``--max-steps``) stand for them."""
    rows = runs[runs["scale"] == scale] if not runs.empty else runs
    stored = int(rows[SEED].nunique()) if not rows.empty and SEED in rows else 1
    specs = manifest.expand(scale, max(manifest.replicates(scale), stored))
    order = {capping.with_max_steps(spec, capped).run_id: i for i, spec in enumerate(specs)}
    current = rows["run_id"].isin(list(order)) if not rows.empty else pd.Series(dtype=bool)
    ordered = rows[current]
    ordered = ordered.iloc[ordered["run_id"].map(order).argsort()] if not ordered.empty else ordered
    return ordered.reset_index(drop=True), rows[~current]


def current_runs(manifest: Manifest, root: Path) -> pd.DataFrame:
    """The tidy table of a manifest's current runs at every stored scale, one row per grid cell (seed means)."""
    runs = table(root, manifest.name)
    means = (
        [seed_means(split_current(manifest, s, runs)[0], cell_keys(manifest, s)) for s in manifest.scale_names()]
        if not runs.empty
        else []
    )
    means = [f for f in means if not f.empty]
    return pd.concat(means, ignore_index=True) if means else runs.iloc[0:0]


def context(manifest: Manifest, root: Path, scale: str) -> Context:
    """What a manifest's renderers get at ``scale`` (``none``: a manifest that trains nothing)."""
    runs = table(root, manifest.name)
    rows = split_current(manifest, scale, runs)[0] if scale != "none" and not runs.empty else runs.iloc[0:0]
    parts = {
        name: (part, current_runs(part, root)) for name in manifest.parts for part in [lookup.part(manifest, name)]
    }
    return Context(manifest, seed_means(rows, cell_keys(manifest, scale)), scale, root, parts, rows)


def corpus(rows: pd.DataFrame) -> str:
    """The corpus of these runs and the unit their bits are per: ``linux-doc 6.1.192-3 (bits per byte)``."""
    if rows.empty:
        return ""
    units = sorted({str(u) for u in rows.get("dataset_unit", pd.Series(dtype=object)).dropna()})
    return renderers.datasets(rows) + (f" (bits per {', '.join(units)})" if units else "")


def _shown(files: list[tuple[Path, str]], root: Path) -> list[Shown]:
    """The renderers' files as the page shows them: a table's markdown read for inlining."""
    out_dir = root / "reports"
    return [
        Shown(
            str(path.relative_to(out_dir)),
            caption,
            path.read_text(encoding="utf-8"),
            str(table_csv(path).relative_to(out_dir)),
        )
        if path.suffix == ".md"
        else Shown(str(path.relative_to(out_dir)), caption)
        for path, caption in files
    ]


def _notes(manifest: Manifest) -> list[Note]:
    """A derived manifest's notes are its base file's; else its own, and each included file's apart."""
    if not manifest.notes:
        return []
    if manifest.set or manifest.sweep:
        return [Note("base", manifest.path.name, manifest.notes)]
    here = manifest.path.resolve()
    by_file = manifest.notes_from or [(here, manifest.notes)]  # a manifest built without its files': its own
    return [
        Note("own", "", text) if path == here else Note("included", os.path.relpath(path, here.parent), text)
        for path, text in by_file
    ]


def _stored(manifest: Manifest, root: Path, runs: pd.DataFrame) -> list[str]:
    """The scales its runs are stored at; a gathering manifest's are its parts' (it trains none itself)."""
    names = manifest.parts if manifest.base is None and manifest.parts else [manifest.name]
    tables = [runs] if names == [manifest.name] else [table(root, name) for name in names]
    return sorted({s for t in tables for s in set(t.get("scale", []))})
