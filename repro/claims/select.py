"""Selections: which stored runs a claim's ``metric[key=value]`` picks, the replicates (seeds) that complete
a claim, and the seed means every table, figure and claim shares (:func:`seed_means`).

A timing metric (:data:`repro.grammar.language.TIMED`) counts only from runs whose summary says they ran
alone (``ran_alone``: no sampled interval of training had other processes keeping more than half a core
busy; runs stored before 2026-12-02 judged it from the 1-minute load average); a seed whose timed runs
shared the machine is left out, and a claim with no such seed is not evaluable, saying which and how much.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from repro.config.cells import cell_text, value_text
from repro.config.keys import matching
from repro.grammar.language import TIMED, Selection, shown
from repro.store.usable import MISSING, NOT_A_NUMBER, fault

SEED = "train.seed"  # the column that tells a cell's replicates apart


class NotEvaluable(Exception):
    """The runs a claim needs are missing or unfinished."""


def seed_means(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per grid cell (grid order): the numeric summary columns averaged over the cell's finished
    seeds (all of them while none has finished), the rest (run id, lists) of its first seed; ``seeds`` =
    how many were averaged, ``<metric> sd`` their standard deviation, ``ran_alone`` whether every one did.
    The one seed-means function of tables, figures and claims."""
    if rows.empty:
        return rows
    rows = rows.reset_index(drop=True)  # seeds' frames concatenated repeat their indices
    label = cell_labels(rows, keys)
    finished = rows["status"] == "finished"
    done = rows[finished | ~finished.groupby(label).transform("any")]  # a cell's finished seeds, if any
    cell = label[done.index]
    first = ~cell.duplicated()  # each cell's first seed, in grid order
    order = cell[first]
    counts = cell.value_counts(sort=False).reindex(order).to_numpy()
    out = done[first].reset_index(drop=True)
    multi = pd.Series(counts > 1)
    if multi.any():
        numeric = [c for c in done.select_dtypes("number").columns if c not in keys and c != SEED]
        groups = done.groupby(cell, sort=False)
        means = groups[numeric].mean().reindex(order).reset_index(drop=True)
        sds = groups[numeric].std(ddof=1).reindex(order).reset_index(drop=True)
        # every column at once: assigning ~100 summary columns one by one fragments the frame
        averaged = pd.DataFrame({c: out[c].where(~multi, means[c]) for c in numeric})
        out = pd.concat([out.drop(columns=numeric), averaged, sds.where(multi).add_suffix(" sd")], axis=1)
        out = out[[*[c for c in done.columns if c in out], *[c for c in out if c not in done.columns]]]
        if "ran_alone" in done:
            alone = done["ran_alone"].astype(object).where(done["ran_alone"].notna(), False).astype(bool)
            every = alone.groupby(cell, sort=False).all().reindex(order).reset_index(drop=True)
            out["ran_alone"] = out["ran_alone"].astype(object).where(~multi, every)
    return out.assign(seeds=counts)


def cell_labels(rows: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Each row's grid cell as text (the values of those ``keys`` it has, joined): the cells
    :func:`seed_means` groups its seeds by, so that a seed mean's row finds its runs."""
    present = [k for k in keys if k in rows]
    return rows[present].astype(str).agg(",".join, axis=1) if present else pd.Series("", rows.index)


def seeds_of(runs: pd.DataFrame) -> pd.Series:
    return runs[SEED] if SEED in runs else pd.Series(0, index=runs.index)


def complete_seeds(runs: pd.DataFrame, cell_keys: list[str], selections: list[Selection]) -> tuple[list, list[str]]:
    """(the seeds whose runs complete every selection: finished, the metric stored and a number
    (:func:`repro.store.usable.fault`), every cell there, and for a timing metric every run alone; the
    seeds left out because a value they store is no number (text such as ``"NaN"``, a boolean), a line
    each: ``seed 2 dropped: <why>``). A seed not yet run or finished, or without the metric, is left out
    without a word. When no seed completes: the first seed, no line (its selections then say what is
    missing)."""
    seed_of = seeds_of(runs)
    keys = [k for k in cell_keys if k in runs]
    label = runs[keys].astype(str).agg("\x1f".join, axis=1) if keys else pd.Series("", index=runs.index)
    wanted = []  # per selection: the rows of every seed it selects, and how many cells they span
    for metric, filters in selections:
        try:
            every = matching_rows(runs, cell_keys, filters).index
        except NotEvaluable:
            return list(dict.fromkeys(seed_of))[:1], []
        wanted.append((metric, filters, every, label[every].nunique()))

    def incomplete(frame: pd.DataFrame) -> str | None:
        """None when the seed's runs ``frame`` complete every selection, else why not ("": not stored yet)."""
        for metric, filters, every, cells in wanted:
            rows = frame.loc[frame.index.intersection(every)]
            if (
                rows.empty
                or (rows["status"] != "finished").any()
                or metric not in rows
                or MISSING in map(fault, rows[metric])
                or label[rows.index].nunique() != cells
            ):
                return ""
            why = not_a_number(rows, metric, filters)
            if why:
                return why
            if metric in TIMED:
                try:
                    check_alone(rows, metric, filters)
                except NotEvaluable:
                    return ""
        return None

    why = {seed: incomplete(frame) for seed, frame in runs.groupby(seed_of, sort=False)}
    seeds = [seed for seed, said in why.items() if said is None]
    if not seeds:
        return list(dict.fromkeys(seed_of))[:1], []
    return seeds, [f"seed {seed} dropped: {said}" for seed, said in why.items() if said]


def matching_rows(runs: pd.DataFrame, cell_keys: list[str], filters: dict[str, str]) -> pd.DataFrame:
    """The rows whose cell matches every filter (a key names one grid key, or its dotted suffix)."""
    rows = runs
    for key, value in filters.items():
        matches = matching(key, cell_keys)
        if len(matches) != 1:
            raise NotEvaluable(f"filter key {key!r} matches {len(matches)} grid keys of {cell_keys}")
        rows = rows[rows[matches[0]].astype(str) == value]
    return rows


def select(runs: pd.DataFrame, cell_keys: list[str], metric: str, filters: dict[str, str]) -> Any:
    rows = matching_rows(runs, cell_keys, filters)
    used = {c for key in filters for c in matching(key, cell_keys)}
    if rows.empty:
        raise NotEvaluable(f"no run matches {shown(metric, filters)}")
    unfinished = rows[rows["status"] != "finished"]
    if not unfinished.empty:
        raise NotEvaluable(f"{len(unfinished)} run(s) of {shown(metric, filters)} are not finished")
    faults = [fault(value) for value in rows[metric]] if metric in rows else [MISSING]
    if MISSING in faults:
        raise NotEvaluable(f"metric {metric!r} is missing from the runs of {shown(metric, filters)}")
    if metric in TIMED:
        check_alone(rows, metric, filters)
    why = not_a_number(rows, metric, filters)
    if why:
        raise NotEvaluable(why)
    numbers = rows[metric].map(float)
    free = [c for c in cell_keys if c not in used]
    if len(rows) == 1:
        return float(numbers.iloc[0])
    if not free:
        raise NotEvaluable(f"{len(rows)} runs share the cell of {shown(metric, filters)}")
    index = pd.Series(  # the cell in words: its one free value, or every free key=value
        [value_text(r[free[0]]) if len(free) == 1 else cell_text(r[free].to_dict()) for _, r in rows.iterrows()],
        index=rows.index,
    )
    if not index.is_unique:
        raise NotEvaluable(
            f"several runs share a cell of {shown(metric, filters)}: {sorted(index[index.duplicated()])}"
        )
    return pd.Series(numbers.astype(float).values, index=index)


def not_a_number(rows: pd.DataFrame, metric: str, filters: dict[str, str]) -> str | None:
    """Why the runs ``rows`` of a selection hold no number for ``metric``: the first value stored that is
    none (:data:`repro.store.usable.NOT_A_NUMBER`: text such as ``"NaN"``, a boolean, a list), or None."""
    bad = [value for value in rows[metric] if fault(value) == NOT_A_NUMBER]
    return (
        f"metric {metric!r} of a run of {shown(metric, filters)} is {str(bad[0])[:40]!r}, not a number" if bad else None
    )


def check_alone(rows: pd.DataFrame, metric: str, filters: dict[str, str]) -> None:
    """NotEvaluable unless every run of a timing selection ran alone (see the module docstring)."""
    what = shown(metric, filters)
    alone = rows["ran_alone"] if "ran_alone" in rows else pd.Series([None] * len(rows), index=rows.index)
    unknown = int(alone.isna().sum())
    if unknown:
        raise NotEvaluable(
            f"{what}: {unknown} of {len(rows)} run(s) have no load record (stored before the load "
            "was recorded); a timing claim needs runs that ran alone"
        )
    shared = rows[~alone.astype(bool)]
    if not shared.empty:
        others = shared["others_cores_max"] if "others_cores_max" in shared else pd.Series(dtype=float)
        loads = shared["load_average_max"] if "load_average_max" in shared else pd.Series(dtype=float)
        cpus = shared["cpus"].iloc[0] if "cpus" in shared else "?"
        steal = shared["steal_cores_max"] if "steal_cores_max" in shared else pd.Series(dtype=float)
        measured = (
            f"other processes kept up to {others.max():.2f} of {cpus} cores busy"
            + (f", the hypervisor's steal up to {steal.max():.2f}" if steal.notna().any() else "")
            if others.notna().any()
            else f"1-minute load up to {loads.max():.2f} on {cpus} cores"
        )
        raise NotEvaluable(
            f"{what}: {len(shared)} of {len(rows)} run(s) shared the machine ({measured}); a timing claim "
            "needs runs that ran alone"
        )


def as_series(value: Any) -> pd.Series:
    return value if isinstance(value, pd.Series) else pd.Series([value])


def run_ids(runs: pd.DataFrame, cell_keys: list[str], filters: dict[str, str]) -> Any:
    """The run id(s) a selection picks, indexed like :func:`select`'s values (one run: its id)."""
    rows = matching_rows(runs, cell_keys, filters)
    if len(rows) == 1:
        return str(rows["run_id"].iloc[0])
    used = {c for key in filters for c in matching(key, cell_keys)}
    free = [c for c in cell_keys if c not in used]
    index = [value_text(r[free[0]]) if len(free) == 1 else cell_text(r[free].to_dict()) for _, r in rows.iterrows()]
    return pd.Series(list(rows["run_id"]), index=index)
