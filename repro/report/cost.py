"""What a reviewer can do about a verdict (issue 60, point 7): the command that would make a *not evaluable*
claim evaluable, with its cost estimated from the stored runs' wall times (training + scoring, as
``repro status --stale`` adds them up), or why no command can; and what a verdict's interval covers (the
seeds vary the initialisation, and the data order only where the batches are drawn from the seed)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import pandas as pd

from repro.claims import verdict as verdicts
from repro.claims.select import NotEvaluable, matching_rows, seeds_of
from repro.config.manifest import Manifest
from repro.grammar import language
from repro.progress import duration

SEQUENCES = ("dim", "sample")  # units of whole examples (image pixels, audio samples): shuffled per seed


def hours(rows: Iterable[dict]) -> float:
    """The hours the stored wall times (training and scoring) of ``rows`` add up to (a run without: none)."""
    seconds = [(r.get("train_seconds") or 0) + (r.get("eval_seconds") or 0) for r in rows]
    return sum(s for s in seconds if isinstance(s, (int, float)) and not math.isnan(s)) / 3600


def covers(rows: pd.DataFrame, split: str) -> str:
    """What the seeds of ``rows`` vary, and the one split their bits score: the initialisation, and the
    data order where the batches are drawn from ``train.seed`` (whole examples shuffled per epoch, or
    stream passes started at a seeded offset)."""
    units = set(rows.get("dataset_unit", pd.Series(dtype=object)).dropna())
    passes = set(rows.get("train.stream_passes", pd.Series(dtype=object)).dropna())
    if units & set(SEQUENCES):
        varied = "initialisations and example orders"
    elif "random_offset" in passes:
        varied = "initialisations and pass offsets"
    else:
        varied = "initialisations; one data order"
    return f"{varied}; one split, {split}"


def _finished(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] == "finished"] if "status" in rows else rows


def _per_run(rows: pd.DataFrame) -> float | None:
    """The mean hours of a finished run among ``rows`` (None: none of them is timed)."""
    timed = [r for r in _finished(rows).to_dict("records") if (r.get("train_seconds") or 0) > 0]
    return hours(timed) / len(timed) if timed else None


def _cost(runs: int, per_run: float | None) -> str:
    if per_run is None:
        return "cost unknown: no run of it is stored and timed at this scale"
    spent = duration(runs * per_run * 3600)
    return f"about {spent} for {runs} run{'s' * (runs != 1)} at the stored runs' mean wall time"


def _in_grid(selection: str, manifest: Manifest, scale: str) -> bool:
    """Whether a cell of ``scale``'s grid matches a selection as a check writes it (``m[k=v]``)."""
    _, filters = language.parse(selection)[1][0]
    cells = pd.DataFrame([spec.cell for spec in manifest.expand(scale)])
    try:
        return not matching_rows(cells, list(manifest.grid_for(scale)), filters).empty
    except (NotEvaluable, KeyError):
        return False


def remedy(verdict: verdicts.Verdict, manifest: Manifest, scale: str, rows: pd.DataFrame) -> str:
    """For a not-evaluable ``verdict`` (at ``scale``, over its current ``rows``): the command that would
    make it evaluable and its estimated cost, or why none can ("" otherwise). The runs expected are every
    cell's at the seeds stored (at least the first look's)."""
    if verdict.status != verdicts.NOT_EVALUABLE:
        return ""
    stored = int(seeds_of(rows).nunique()) if not rows.empty else 0
    expected = len(manifest.expand(scale, max(manifest.replicates(scale), stored)))
    command, per_run = f"repro run {manifest.command} --scale {scale}", _per_run(rows) if not rows.empty else None
    missing = max(expected - len(_finished(rows)), 0) if not rows.empty else expected
    train = f"train the scale's missing runs: `{command}` ({_cost(missing, per_run)})"
    absent = re.search(r"no run matches (\S+\[[^\]]*\])", verdict.detail)
    if rows.empty or (absent and _in_grid(absent.group(1), manifest, scale)) or " are not finished" in verdict.detail:
        return train if missing else f"finish its runs: `{command}`"
    if absent:
        return f"no command: this scale's grid has no cell {absent.group(1)} names"
    if "a timing claim needs runs that ran alone" in verdict.detail:
        return "no command here: a timing claim needs its runs trained again on a machine nothing else loads"
    if verdict.failed or verdict.control in ("trajectory", "initial-span control"):
        what = "its premise failed" if verdict.failed else f"its {verdict.control} stopped it"
        return f"no command makes it evaluable at this design: {what} on the data (another budget is a new design)"
    if verdict.control == "provenance":
        lost = rows[rows["run_id"].isin(set(verdict.lost))]
        retrain = f"repro retrain {manifest.command} --scale {scale} --stale"
        return f"retrain its arms at one commit: `{retrain}` ({_cost(max(len(lost), 1), _per_run(lost) or per_run)})"
    if verdict.control == "control" and f"is {verdicts.WITHIN_NOISE}" in verdict.detail.split(";")[0]:
        looks = manifest.looks(scale)
        more = [n for n in looks.counts if n > stored]
        if not more:
            return "no command at this design: its control is within noise at its last look"
        added = (more[0] - stored) * max(expected // max(looks.counts[0], stored, 1), 1)
        return f"its next look may decide its control: `{command} --seeds {more[0]}` ({_cost(added, per_run)})"
    if verdict.control == "control":
        return "no command makes it evaluable at this design: its control reads against it"
    return "no command: what stopped it is not a run or a seed the store lacks"
