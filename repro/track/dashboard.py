"""``repro dashboard``: the store's runs in a local trackio dashboard, with no account and no network.

One trackio project (``repro``) per results root, kept in ``<results>/trackio/``. Each finished run is
one trackio run, id ``<manifest>/<run_id>``, grouped by manifest; its config is the flattened spec
plus the grid keys as their own columns; its metrics are metrics.csv's (per-head series as a mean
per layer, as W&B gets them), and the summary's numbers
arrive as ``summary/<key>`` at the last step (trackio draws single-point metrics as bar charts,
one bar per run). Importing is incremental: a run already in the project is not imported again.
Unfinished runs wait until they finish.
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from repro.errors import UserError
from repro.store.runs import RunDir, table
from repro.track.loggers import PROJECT, grid_columns, per_head_view

SECTIONS = ("data", "model", "train", "eval")


@dataclass
class Imported:
    imported: list[str] = field(default_factory=list)  # trackio run ids
    present: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return self.imported + self.present


def trackio_dir(root: Path) -> Path:
    return root / "trackio"


def storage(root: Path):
    """trackio's storage, bound to ``<results>/trackio`` (trackio reads ``TRACKIO_DIR`` once, on import)."""
    os.environ["TRACKIO_DIR"] = str(trackio_dir(root))
    try:
        from trackio import utils
        from trackio.sqlite_storage import SQLiteStorage
    except ImportError:
        raise UserError("repro dashboard needs trackio: pip install -e '.[dashboard]'") from None
    if Path(utils.TRACKIO_DIR).resolve() != trackio_dir(root).resolve():
        raise UserError(f"trackio is already bound to {utils.TRACKIO_DIR} in this process, not {trackio_dir(root)}")
    return SQLiteStorage


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys; lists become JSON text (one comparable cell)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, (list, tuple)) else value
    return out


def run_config(run: RunDir) -> dict[str, Any]:
    spec = run.spec()
    flat = flatten({k: spec[k] for k in SECTIONS if k in spec})
    head = {k: spec.get(k) for k in ("manifest", "run_id", "scale", "code_version")}
    return {
        **head,
        **grid_columns(spec.get("cell") or {}, set(head) | set(flat)),
        **flat,
        "_Group": spec.get("manifest"),
    }


def run_name(run: RunDir) -> str:
    spec = run.spec()
    cell = " ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in (spec.get("cell") or {}).items())
    return " ".join(p for p in (spec["manifest"], spec.get("scale"), cell, f"({run.run_id[:6]})") if p)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def run_metrics(run: RunDir) -> tuple[list[dict[str, float]], list[int]]:
    """metrics.csv as trackio rows (NaN cells dropped; per-head series as per-layer means, as on W&B),
    the summary's numbers merged into the last row."""
    frame = run.metrics()
    rows, steps = [], []
    for record in frame.to_dict("records"):
        values, _ = per_head_view({k: float(v) for k, v in record.items() if k != "step" and _number(v)})
        if values:
            rows.append(values)
            steps.append(int(record["step"]))
    summary = {f"summary/{k}": float(v) for k, v in run.summary().items() if _number(v)}
    if rows:
        rows[-1].update(summary)
    else:
        rows, steps = [summary], [int(run.summary().get("steps") or 0)]
    return rows, steps


def import_runs(root: Path, manifest: str | None = None) -> Imported:
    """Import the store's finished runs (of one manifest, or all) into the results root's project."""
    store = storage(root)
    existing = {record["id"] for record in store.get_run_records(PROJECT)}
    done = Imported()
    runs = table(root, manifest)
    for _, row in runs.iterrows() if not runs.empty else []:
        run = RunDir(root, row["manifest"], row["run_id"])
        key = f"{row['manifest']}/{row['run_id']}"
        if row["status"] != "finished":
            done.unfinished.append(key)
        elif key in existing:
            done.present.append(key)
        else:
            rows, steps = run_metrics(run)
            store.bulk_log(
                project=PROJECT, run=run_name(run), run_id=key, metrics_list=rows, steps=steps, config=run_config(run)
            )
            done.imported.append(key)
    return done


def page_url(base: str, run_ids: list[str]) -> str:
    """The dashboard's address showing the project, with ``run_ids`` selected when given."""
    query = {"project": PROJECT, **({"run_ids": ",".join(run_ids)} if run_ids else {})}
    return f"{base.rstrip('/')}/?{urlencode(query)}"


def serve(root: Path, run_ids: list[str], port: int | None = None, host: str | None = None) -> None:
    """Serve the dashboard until interrupted (Ctrl-C)."""
    storage(root)
    import trackio  # the optional `dashboard` extra, bound to the results root by storage()

    server, local_url, _, _ = trackio.show(
        project=PROJECT, open_browser=False, block_thread=False, server_port=port, host=host
    )
    print(f"dashboard: {page_url(local_url, run_ids)}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("dashboard stopped")
    finally:
        server.close()
