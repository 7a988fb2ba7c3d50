"""A scale's runs as the report tabulates them: the table of runs (each seed apart, or a row per grid cell
with ``mean ± sd``) with the paper's values beside, how the runs' bits were scored, and where a cell's
valid and test bits lie far apart."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from repro.claims.select import SEED
from repro.config.cells import value_text
from repro.config.manifest import Manifest
from repro.config.metrics import implausible_mfu, mfu_text, split_gap
from repro.report.renderers import format_value, reference_for
from repro.store.runs import short_names

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


def run_table(
    manifest: Manifest,
    rows: pd.DataFrame,
    keys: list[str],
    spread: bool = False,
    extra: list[str] = (),
    replicates: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per run (the csv, each seed apart) or, with ``spread``, per grid cell from the seed means of
    :func:`repro.claims.select.seed_means`: ``mean ± sd`` over its seeds and their number ``n``; the paper's
    values beside. ``extra``: metrics shown after :data:`COLUMNS` (:func:`repro.report.renderers.claim_metrics`).
    An MFU above 1 (a run's, or any of a cell's seeds' in ``replicates``) is shown as implausible, with why
    (:func:`repro.config.metrics.mfu_text`)."""
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
            if c == "mfu":  # above 1: text, with why; else the number
                seeds = _seeds(replicates, cell, c) if spread and replicates is not None else [row[c]]
                if any(implausible_mfu(v) for v in seeds):
                    record[c] = mfu_text(format_value(record[c]), seeds)
        if spread:
            record["n"] = int(row["seeds"])
        reference = reference_for(manifest, cell)
        if "label" in reference:
            record["paper row"] = reference.pop("label")
        reference.pop("prior", None)  # a prior-work row: the dashboard draws no bar for it, the table no column
        record.update({f"paper {k}": v for k, v in reference.items()})
        out.append(record)
    return pd.DataFrame(out)


def _seeds(replicates: pd.DataFrame, cell: dict[str, Any], column: str) -> list[Any]:
    """``column`` of every run of ``replicates`` in grid cell ``cell`` (compared as text, as seed_means groups)."""
    if column not in replicates:
        return []
    same = pd.Series(True, index=replicates.index)
    for key, value in cell.items():
        same &= replicates[key].astype(str) == str(value)
    return list(replicates.loc[same, column])


def split_gaps(cells: pd.DataFrame) -> tuple[int, int, str] | None:
    """Where a cell's valid and test bits (seed means) lie far apart (:func:`repro.config.metrics.split_gap`):
    (in how many cells, of how many, the widest gap's words); None where none does."""
    if cells.empty or not {"valid_bits", "test_bits"} <= set(cells):
        return None
    said = [
        (abs(v - t), gap)
        for v, t in zip(cells["valid_bits"], cells["test_bits"])
        if (gap := split_gap(None if _missing(v) else v, None if _missing(t) else t))
    ]
    return (len(said), len(cells), max(said)[1]) if said else None


def evaluation(rows: pd.DataFrame) -> list[str]:
    """How the runs' bits were scored, once per distinct procedure (the procedure moves the bits a little)."""
    phrases: list[str] = []
    finished = rows[rows["status"] == "finished"] if "status" in rows else rows
    for _, row in (finished if not finished.empty else rows).iterrows():
        phrase = _procedure(row)
        if phrase not in phrases:
            phrases.append(phrase)
    return phrases


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


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
