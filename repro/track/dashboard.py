"""``repro dashboard``: the store's runs in a local trackio dashboard, with no account and no network.

One trackio project per scale (``repro-tiny``, ``repro-cpu``, ...: one scale at a time; trackio's
Project menu switches), all kept in ``<results>/trackio/``. Each finished run is one trackio run, id
``<manifest>/<run_id>``, named short enough for a bar's label: its grid values (a one-key grid's value
alone), its seed where the cell has several, its manifest (``adaptive-small s1 · as-table1``).

Cells, not seeds, are compared: every run of a grid cell (its seeds) is drawn in the cell's one colour
(a palette ordered as trackio orders the runs, :func:`cell_palette`), and the config's ``_Group`` is the
cell, so trackio's "Group by: Group" lists each cell's seeds together. (trackio cannot preset "Group
by", nor draw a band over seeds: docs/tracking.md.)

Metrics: metrics.csv's series (per-head series as a mean per layer, as W&B gets them; the model's
constants, :data:`repro.track.loggers.CONSTANTS`, go to the config), and at the last step the
summary's results as ``summary/<key>`` (trackio draws single-point metrics as bars, one per run),
with the paper's number beside them as ``<name> (paper)``, once a cell (on its first seed's run: not
one equal bar per seed), where the manifest's ``reference.runs`` gives one for the run's cell and it is
the same model (not an entry marked ``prior: true``: a prior
work's number in the role the cell plays, which the report names but the dashboard does not draw). The page opens on one section, ``bits``: ``train/bits`` and
``valid/bits_quick`` against steps, then the summary's test and valid bits (:data:`RENAMED`,
:data:`PLOT_ORDER`).

Config: manifest, scale, run id, code version and the grid values as top-level columns (trackio's
"Group by" choices; ``_Group`` is the cell) with the model's constants, then the spec's sections,
the summary (less what the config says already) and the paper's reference entry as nested mappings,
lists as lists (the run comparer shows ``data.block``, ``["valid","test"]``).

Importing is incremental: a run already in its project is not imported again, unless an older
version of this module imported it (:data:`FORMAT`); unfinished runs wait until they finish.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from repro.config import lookup
from repro.config.access import NONE, Access
from repro.config.cells import cell_text, value_text
from repro.config.metrics import implausible_mfu, mfu_text
from repro.errors import UserError
from repro.store.runs import RunDir, sources, table
from repro.track.loggers import PROJECT, grid_columns, per_head_view, split_constants

SECTIONS = ("data", "model", "train", "eval")
FORMAT = 4  # what an import writes; runs imported in another format are imported again
# The summary's results drawn as bars (the rest of the summary is config): bits first.
BARS = re.compile(r"^(test_bits|valid_bits)(_.*)?$|^(avg_span|dynamic_span_mean|flops_per_token|seconds_per_step)$")
# The first section, ``bits``: the curves and the summary's bits (the paper's beside them); the page opens on it.
RENAMED = {
    "train/bits": "bits/train",
    "valid/bits_quick": "bits/valid_quick",
    "summary/test_bits": "bits/test",
    "summary/valid_bits": "bits/valid",
}
PLOT_ORDER = (
    "bits/train",
    "bits/valid_quick",
    "bits/test",
    "bits/test (paper)",
    "bits/valid",
    "bits/valid (paper)",
    "summary/avg_span",  # then the other results, the training's own series, and the model's
    "summary/avg_span (paper)",
    "train/lr",
)
WIDE = 12  # up to this many runs on the page: two plots per row (room for the bars' labels); more: one


@dataclass
class Imported:
    imported: list[str] = field(default_factory=list)  # trackio run ids
    present: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    scales: dict[str, str] = field(default_factory=dict)  # trackio run id -> its scale (imported or present)

    def ids(self, scale: str) -> list[str]:
        return [key for key in self.imported + self.present if self.scales[key] == scale]


def trackio_dir(root: Path) -> Path:
    return root / "trackio"


def project(scale: str) -> str:
    """The trackio project of one scale's runs."""
    return f"{PROJECT}-{scale}"


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


def cell_columns(cell: dict[str, Any], taken: set[str]) -> dict[str, Any]:
    """The grid values as top-level columns, a mapping value (a grid row over a section) by its items,
    named as the report's tables name them; dots become ``_`` (trackio's comparer escapes them)."""
    flat: dict[str, Any] = {}
    for key, value in cell.items():
        flat.update({f"{key}.{k}": v for k, v in value.items()} if isinstance(value, dict) else {key: value})
    return {k.replace(".", "_"): v for k, v in grid_columns(flat, taken).items()}


def cell_words(cell: dict[str, Any]) -> str:
    """A grid cell in few words: a one-key grid's value alone (``adaptive-small``), else ``key=value``s."""
    if len(cell) == 1 and not isinstance(next(iter(cell.values())), dict):
        return value_text(next(iter(cell.values())))
    return cell_text(cell)


def group_name(spec: dict[str, Any]) -> str:
    """The run's grid cell and manifest (``adaptive-small · as-table1``): what its seeds share."""
    words = cell_words(spec.get("cell") or {})
    return f"{words} · {spec['manifest']}" if words else spec["manifest"]


def run_name(spec: dict[str, Any], seeds: bool = False, twin: bool = False) -> str:
    """``<grid values> s<seed> · <manifest>``: the seed where the cell has several (``seeds``); ``twin``
    (another stored run of the same cell and seed: a shortened one, say) adds the run id's start."""
    words = cell_words(spec.get("cell") or {})
    seed = ((spec.get("train") or {}).get("seed")) if seeds else None
    head = " ".join(w for w in (words, f"s{seed}" if seed is not None else "") if w)
    name = f"{head} · {spec['manifest']}" if head else spec["manifest"]
    return f"{name} #{spec['run_id'][:6]}" if twin else name


def cell_palette(groups: list[str], colours: list[str]) -> list[str]:
    """trackio's page colours the n-th run it lists (the newest first) with the n-th colour of its
    palette: given each run's group in the page's order, the palette that gives every run of a group
    its group's colour."""
    order = list(dict.fromkeys(groups))
    return [colours[order.index(g) % len(colours)] for g in groups]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def run_config(run: RunDir, constants: dict[str, Any], paper: dict[str, Any]) -> dict[str, Any]:
    spec = run.spec()
    head = {k: spec.get(k) for k in ("manifest", "scale", "run_id", "code_version")}
    nested = {k: spec[k] for k in SECTIONS if k in spec}
    taken = set(head) | set(nested) | set(constants) | {"summary", "paper"}
    said = taken | {"cell", "family", "status"}  # the summary's copies of what the config says already
    summary = {k: v for k, v in run.summary().items() if k not in said}
    if implausible_mfu(summary.get("mfu")):  # not a number to compare: shown with why
        summary["mfu"] = mfu_text(f"{summary['mfu']:.4g}", [summary["mfu"]])
    return {
        **head,
        **cell_columns(spec.get("cell") or {}, taken),
        **constants,
        **nested,
        "summary": summary,
        **({"paper": paper} if paper else {}),
        "_Group": group_name(spec),
        "_repro_format": FORMAT,
    }


def run_metrics(run: RunDir, paper: dict[str, Any]) -> tuple[list[dict[str, float]], list[int], dict[str, Any]]:
    """metrics.csv as trackio rows (NaN cells dropped; per-head series as per-layer means, as on W&B;
    constants split off and returned), the summary's results and the paper's numbers merged into the
    last row."""
    frame = run.metrics()
    rows, steps, constants = [], [], {}
    for record in frame.to_dict("records"):
        values, fixed = split_constants({k: float(v) for k, v in record.items() if k != "step" and _number(v)})
        values, _ = per_head_view(values)
        constants.update(fixed)
        if values:
            rows.append({RENAMED.get(k, k): v for k, v in values.items()})
            steps.append(int(record["step"]))
    summary = {k: float(v) for k, v in run.summary().items() if BARS.match(k) and _number(v)}
    names = {k: RENAMED.get(f"summary/{k}", f"summary/{k}") for k in summary}
    last = {names[k]: v for k, v in summary.items()}
    if not paper.get("prior"):  # a prior work's number is another model's: not drawn beside ours
        last.update({f"{names[k]} (paper)": float(paper[k]) for k in summary if _number(paper.get(k))})
    if rows:
        rows[-1].update(last)
    else:
        rows, steps = [last], [int(run.summary().get("steps") or 0)]
    return rows, steps, {k: int(v) if float(v).is_integer() else v for k, v in constants.items()}


class _References:
    """The paper's reference entry of a run's cell (``reference.runs``), its manifest read once; {} for a
    manifest that no longer resolves."""

    def __init__(self, root: Path, access: Access):
        self.stored = lookup.Stored(sources(root), f"{root}/sources")
        self.access = access
        self._manifests: dict[str, Any] = {}

    def __call__(self, manifest: str, cell: dict[str, Any]) -> dict[str, Any]:
        from repro.report.renderers import reference_for  # pandas

        if manifest not in self._manifests:
            try:
                self._manifests[manifest] = lookup.one(manifest, [], self.stored, self.access)
            except UserError:  # ManifestError is one
                self._manifests[manifest] = None
        found = self._manifests[manifest]
        return reference_for(found, cell) if found is not None else {}


def import_runs(root: Path, manifest: str | None = None, access: Access = NONE) -> Imported:
    """Import the store's finished runs (of one manifest, or all) into their scales' projects."""
    store = storage(root)
    done = Imported()
    runs = table(root, manifest)
    if runs.empty:
        return done
    formats: dict[str, dict[str, Any]] = {}  # project -> trackio run id -> the format it was imported in
    references = _References(root, access)
    specs = {
        (row["manifest"], row["run_id"]): RunDir(root, row["manifest"], row["run_id"]).spec()
        for _, row in runs.iterrows()
    }

    def cell(s: dict) -> tuple:
        return s["manifest"], s.get("scale"), cell_text(s.get("cell") or {})

    def seed(s: dict) -> Any:
        return (s.get("train") or {}).get("seed")

    cells = Counter(cell(s) for s in specs.values())
    seeded = Counter((*cell(s), seed(s)) for s in specs.values())
    # the paper's number is one bar a cell, beside its first seed (not one per seed: three equal bars)
    first: dict[tuple, Any] = {}
    for s in sorted(specs.values(), key=lambda s: (seed(s) is None, seed(s) or 0)):  # a spec may lack one
        first.setdefault(cell(s), seed(s))
    by_key = {(r["manifest"], r["run_id"]): r for r in runs.to_dict("records")}
    # imported cell by cell, each cell's seeds in order: the page lists a cell's seeds together
    for stored in sorted(specs, key=lambda k: [str(v) for v in (*cell(specs[k]), seed(specs[k]))]):
        row, spec = by_key[stored], specs[stored]
        run = RunDir(root, row["manifest"], row["run_id"])
        key, name = f"{row['manifest']}/{row['run_id']}", project(str(spec.get("scale")))
        if name not in formats:
            configs = store.get_all_run_configs(name)
            formats[name] = {
                r["id"]: (configs.get(r["id"]) or {}).get("_repro_format") for r in store.get_run_records(name)
            }
        if row["status"] != "finished":
            done.unfinished.append(key)
            continue
        done.scales[key] = str(spec.get("scale"))
        if formats[name].get(key) == FORMAT:
            done.present.append(key)
            continue
        if key in formats[name]:  # imported in another format: replaced
            store.delete_run(name, key, run_id=key)
        paper = references(spec["manifest"], spec.get("cell") or {})
        rows, steps, constants = run_metrics(run, paper if seed(spec) == first[cell(spec)] else {})
        twin = seeded[(*cell(spec), seed(spec))] > 1
        store.bulk_log(
            project=name,
            run=run_name(spec, seeds=cells[cell(spec)] > 1, twin=twin),
            run_id=key,
            metrics_list=rows,
            steps=steps,
            config=run_config(run, constants, paper),
        )
        done.imported.append(key)
    return done


def page_url(base: str, scale: str, run_ids: list[str], shown: int) -> str:
    """The dashboard's address showing one scale's project, with ``run_ids`` selected when given;
    ``shown`` runs set the plots per row (:data:`WIDE`)."""
    query = {
        "project": project(scale),
        **({"run_ids": ",".join(run_ids)} if run_ids else {}),
        "plots_per_row": 2 if shown <= WIDE else 1,
    }
    return f"{base.rstrip('/')}/?{urlencode(query)}"


def serve(
    root: Path, scale: str, run_ids: list[str], shown: int, port: int | None = None, host: str | None = None
) -> None:
    """Serve the dashboard of ``scale`` (``shown`` runs, ``run_ids`` selected) until interrupted (Ctrl-C)."""
    store = storage(root)
    os.environ["TRACKIO_PLOT_ORDER"] = ",".join(PLOT_ORDER)  # read by trackio's server on each request
    import trackio  # the optional `dashboard` extra, bound to the results root by storage()
    from trackio.utils import DEFAULT_COLOR_PALETTE

    configs = store.get_all_run_configs(project(scale))
    # the page lists the newest run first, and colours the runs in that order
    records = reversed(store.get_run_records(project(scale)))
    groups = [(configs.get(r["id"]) or {}).get("_Group") or r["id"] for r in records]
    with contextlib.redirect_stdout(io.StringIO()):  # trackio's own lines: a second URL, with a write token
        server, local_url, _, _ = trackio.show(
            project=project(scale),
            open_browser=False,
            block_thread=False,
            server_port=port,
            host=host,
            color_palette=cell_palette(groups, DEFAULT_COLOR_PALETTE) or None,
        )
    print(f"dashboard: {page_url(local_url, scale, run_ids, shown)}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("dashboard stopped")
    finally:
        server.close()
