"""A claim judged with its requirements: the one entry point, :func:`evaluate`.

What keeps a verdict honest, each *not evaluable* with its numbers when it fails, and listed in the
verdict's ``held`` when it holds:

- **preconditions** (``requires``): each must hold on *every* seed the claim pairs (a gate, never a seed
  mean); a claim that the models learned is no precondition of itself;
- **controls** (``controls``): comparisons judged like the claim, at its seeds; a claim that reads
  reproduced *or not reproduced* (or either way on one seed) stands only when each of its controls is
  reproduced too (e.g. adaptive span must also beat a fixed S = R window, which a span stuck at R would
  be): a control within noise, not reproduced or not trained makes it not evaluable, saying which. Both
  directions are gated alike, so a failing control never leaves a "not reproduced" standing (which would
  bias the counts toward not reproduced);
- **the initial-span control**: a claim on a span metric (:data:`repro.families.adaptive_span.INITIAL`)
  that would also hold with every learned span at its initial value (z = 0) says nothing about the penalty;
- **the trajectory** (:mod:`repro.claims.trajectory`): a bits verdict must keep its sign along the paired
  training curves and their fits;
- **provenance** (:mod:`repro.claims.pairs`): a seed whose arms ran different code (their computation digests,
  ``computes``), or one with an arm trained from uncommitted code (``+dirty``), is dropped and the claim judged
  on the seeds left (the verdict's ``dropped`` says which and why); not evaluable only when no seed is left.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pandas as pd

from repro.claims import pairs, power, sequential, trajectory
from repro.claims.judge import judge
from repro.claims.select import NotEvaluable, complete_seeds, matching_rows, run_ids, seed_means, seeds_of
from repro.claims.stats import CONFIDENCE
from repro.claims.verdict import (
    INDICATIVE,
    NOT_EVALUABLE,
    NOT_REPRODUCED,
    READING,
    REPRODUCED,
    Verdict,
    failed_text,
    stopped,
)
from repro.config.looks import Looks
from repro.families import adaptive_span
from repro.grammar import language


def evaluate(
    check: str | language.Check,
    runs: pd.DataFrame,
    cell_keys: list[str],
    requires: list[str | language.Check] = (),
    confidence: float = CONFIDENCE,
    controls: list[str | language.Check] = (),
    sesoi: float = math.nan,
    curves: trajectory.Curves | None = None,
    computes: pairs.Computes | None = None,
    looks: Looks | None = None,
) -> Verdict:
    """Judge ``check`` over ``runs`` (one row per run in grid order: ``status``, the cell keys, the summary
    metrics, ``train.seed`` for replicates, ``code_version`` and ``digest`` where known) after its
    requirements, on the seeds whose arms ran the same code (``computes``: a run's digest at a commit).
    Each check is parsed here once (none that comes parsed, :class:`repro.grammar.language.Check`, again)."""
    check, level = language.compiled(check), power.of_claim(check, sesoi)  # what a premise's `sesoi` names
    requires = [language.compiled(power.bound(p, level)) for p in requires]
    controls = [language.compiled(power.bound(c, level)) for c in controls]
    return _provenance(
        lambda rows: _judged(check, rows, cell_keys, requires, confidence, controls, sesoi, curves, looks),
        runs,
        computes,
    )


def _judged(check, runs, cell_keys, requires, confidence, controls, sesoi, curves, looks) -> Verdict:
    """The verdict of ``check`` on ``runs`` after its requirements and every gate but provenance."""
    judged_first = {p.text: precondition(p, runs, cell_keys) for p in requires if p.text != check.text}
    failed = [text for text, v in judged_first.items() if v.status != REPRODUCED]
    if failed:  # its numbers with it: a premise that fails says by how much (issue 60)
        numbers = "; ".join(f"`{p}`: {judged_first[p].detail}" for p in failed)
        return Verdict(NOT_EVALUABLE, f"{failed_text([f'`{p}`' for p in failed])} ({numbers})", failed=failed)
    frames, means, dropped = paired(runs, cell_keys, [check])
    look = ""
    if looks is not None and looks.sequential:  # judged at the look its seeds reach (repro.claims.sequential)
        if len(frames) > looks.counts[-1]:
            frames = frames[: looks.counts[-1]]
            means = seed_means(pd.concat(frames), cell_keys)
        k, nominal = looks.reached(len(frames)), sequential.level(looks, len(frames), 1 - confidence)
        look = f"look {k + 1} of {len(looks.counts)} ({looks.text()}): one-sided level {nominal:.3g}"
        spend, confidence = (1 - confidence) / nominal, 1 - nominal
    verdict = judge(check, means, frames, cell_keys, confidence)
    verdict.dropped = dropped
    verdict.held += [_premise(p, runs, cell_keys, confidence) for p in requires if p.text in judged_first]
    band = verdict.decided.band if verdict.decided is not None else None
    # none declared: a band's is its half-width (what it calls equivalent), else its metric's default
    verdict.sesoi = sesoi if not math.isnan(sesoi) else band if band is not None else power.default_sesoi(check)
    if look:
        verdict.look, verdict.spend = look, spend
    reading = READING.get(verdict.status, (1 if verdict.holds else -1) if verdict.status == INDICATIVE else 0)
    for gate in (
        lambda v: _controls(v, controls, runs, cell_keys, confidence, reading),
        lambda v: _initial_span_control(check, v, means, cell_keys, confidence),
        lambda v: _trajectory(check, v, frames, cell_keys, curves, reading),
    ):
        if verdict.status == NOT_EVALUABLE:
            break
        verdict = gate(verdict)
    return verdict


def paired(
    runs: pd.DataFrame, cell_keys: list[str], checks: list[str | language.Check]
) -> tuple[list[pd.DataFrame], pd.DataFrame, list[str]]:
    """(each complete seed's runs, the seed means of those runs, a line per seed left out because a value
    it stores is no number) for ``checks``."""
    runs = runs.reset_index(drop=True)  # rows are told apart by position
    seeds, notes = complete_seeds(runs, cell_keys, [sel for c in checks for sel in language.compiled(c).selections])
    frames = [runs[seeds_of(runs) == seed] for seed in seeds]
    return frames, seed_means(pd.concat(frames), cell_keys) if len(frames) > 1 else frames[0], notes


def precondition(check: str | language.Check, runs: pd.DataFrame, cell_keys: list[str]) -> Verdict:
    """A precondition judged alone: it holds (*reproduced*) only when it holds on every seed of the seeds
    that complete it, never on a seed mean; the detail gives its values' spread, the seeds it fails on and
    those it dropped (a value no number), as the preconditions' table shows it."""
    check = language.compiled(check)
    frames, means, dropped = paired(runs, cell_keys, [check])
    verdict = judge(check, means, [means], cell_keys, CONFIDENCE, gate=True)
    if verdict.status != NOT_EVALUABLE and len(frames) > 1:
        verdict.detail = judge(check, means, frames, cell_keys, CONFIDENCE, gate=True).detail
        verdict.seeds = len(frames)
        each = [judge(check, frame, [frame], cell_keys, CONFIDENCE, gate=True).status for frame in frames]
        failing = [str(seeds_of(frame).iloc[0]) for frame, status in zip(frames, each) if status != REPRODUCED]
        verdict.status = NOT_REPRODUCED if failing else REPRODUCED
        if failing:
            verdict.detail += f"; fails on seed{'s' * (len(failing) > 1)} {', '.join(failing)} of {len(frames)}"
    verdict.dropped = dropped
    verdict.detail += "".join(f"; {note}" for note in dropped)
    return verdict


def _premise(premise: language.Check, runs: pd.DataFrame, cell_keys: list[str], confidence: float) -> str:
    """A premise that held, as a verdict's ``held`` says it: its paired margin (the cell that decided)."""
    frames, means, _ = paired(runs, cell_keys, [premise])  # a seed it drops: said by its precondition
    judged = judge(premise, means, frames, cell_keys, confidence)
    return f"premise `{premise.text}`: holds on every seed ({judged.effect or judged.detail})"


def _controls(verdict: Verdict, controls, runs, cell_keys, confidence, reading: int) -> Verdict:
    """A claim that reads either way stands only when each control is reproduced (the module docstring)."""
    if reading == 0:
        return verdict
    for control in map(language.compiled, controls):
        frames, means, dropped = paired(runs, cell_keys, [control])
        judged = judge(control, means, frames, cell_keys, confidence)
        verdict.dropped += [note for note in dropped if note not in verdict.dropped]
        one_seed = verdict.status == INDICATIVE and judged.status == INDICATIVE and judged.holds
        if judged.status != REPRODUCED and not one_seed:  # a one-seed claim takes its control's sign alike
            said = judged.effect or judged.detail
            return stopped(verdict, "control", f"control `{control.text}` is {judged.status} ({said})")
        verdict.held.append(f"control `{control.text}`: {judged.effect}")
        verdict.runs, verdict.computed = verdict.runs | judged.runs, verdict.computed | judged.computed
    return verdict


def _initial_span_control(
    check: language.Check, verdict: Verdict, means: pd.DataFrame, cell_keys, confidence
) -> Verdict:
    """Not evaluable when the claim holds and would hold at the spans' initial value too (z = 0): true
    by construction, it says nothing about the penalty (a lambda = 0 control starts alike, so a claim
    against one passes this control)."""
    spans = [f for m, f in check.selections if m in adaptive_span.INITIAL]
    learned = adaptive_span.learned(means)
    if not spans or learned is None or not (verdict.status == REPRODUCED or verdict.holds):
        return verdict
    try:
        touched = any(learned[matching_rows(means, cell_keys, f).index].any() for f in spans)
    except NotEvaluable:
        touched = False
    start = adaptive_span.at_initial_span(means, learned) if touched else None
    if start is None or not judge(check, start, [start], cell_keys, confidence).holds:
        return verdict  # no learned span among the runs its span metrics select, or it fails at z = 0
    return stopped(
        verdict,
        "initial-span control",
        "holds at the initial spans too (z = 0, avg_span = min(S, R)), so it says nothing about the penalty: "
        "compare with a lambda = 0 control",
    )


def _trajectory(check: language.Check, verdict: Verdict, frames, cell_keys, curves, reading: int) -> Verdict:
    """Each bits comparison that decided the reading keeps its sign along the curves (module docstring)."""
    if reading == 0 or curves is None:
        return verdict
    selections = check.selections
    for m in verdict.margins:
        if m.status != reading or None in m.sides:
            continue
        pairs = []
        for frame in frames:
            ids = [run_ids(frame, cell_keys, selections[s][1]) for s in m.sides]
            pairs.append(tuple(str(i[m.cell]) if isinstance(i, pd.Series) else i for i in ids))
        try:
            verdict.held.append(trajectory.check(pairs, curves, reading) + (f" at {m.cell}" if m.cell else ""))
        except trajectory.Fails as why:
            return stopped(verdict, "trajectory", f"{why}{f' at {m.cell}' if m.cell else ''}")
    return verdict


def _provenance(judged: Callable[[pd.DataFrame], Verdict], runs: pd.DataFrame, computes) -> Verdict:
    """``judged(runs)`` on the seeds whose arms ran the same code (:mod:`repro.claims.pairs`), saying which
    seeds were dropped and why; not evaluable when no seed is left."""
    verdict, notes, lost = judged(runs), [], set()
    while drop := pairs.dropped(runs, verdict.runs, computes):
        notes += pairs.notes(drop)
        out = seeds_of(runs).isin(list(drop))
        lost |= set(runs[out & runs["run_id"].isin(set(verdict.runs))]["run_id"])
        runs = runs[~out]
        if runs.empty:
            return replace(stopped(verdict, "provenance", f"no seed is left: {'; '.join(notes)}"), lost=frozenset(lost))
        verdict = judged(runs)
    verdict.dropped, verdict.lost = [*verdict.dropped, *notes], frozenset(lost)
    return verdict
