"""The run store: ``<results>/runs/<manifest>/<run_id>/`` with spec.yaml, metrics.csv, summary.json.

Every file is written atomically and durably (:mod:`repro.files.atomic`), so a reader or a killed writer
never sees half a file. One trainer per run: :meth:`RunDir.lock` is an OS lock the kernel releases when
its holder dies. A file that does not parse, or is no regular file (a FIFO is never read: it would block),
is :class:`CorruptFile` (listed, never a crash);
``scan``/``table`` flatten the store into one pandas row per readable run.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from repro.errors import UserError
from repro.files import atomic, safeyaml
from repro.files.locks import FileLock
from repro.identity import SECTIONS, check_name, is_plain, spec_id
from repro.store import index
from repro.store.computation import computation

FINISHED, RUNNING, FAILED, INTERRUPTED = "finished", "running", "failed", "interrupted"
LIGHTNING_TEMP = ".temp.ckpt"  # Lightning's weight hand-over file under ddp_spawn


class CorruptFile(UserError):
    """A store file that does not parse; the message names the file and the reason."""


@dataclass(frozen=True)
class LeftOut:
    """A run folder a scan of the store leaves out, and why: ``corrupt`` (a file that does not parse or
    names another run: ``repro run`` redoes it), ``unreadable`` (this user may not read it: a folder at
    mode 000), ``linked`` (a symbolic link in place of a run's or a manifest's folder: never followed) or
    ``damaged`` (a FIFO, a folder or a link in place of its metrics.csv or analysis.npz: never opened).
    The runs beside it are served."""

    kind: str
    why: str  # the path and the reason
    folder: Path | None = None  # the run's folder, for a damaged one (whose spec and summary read)

    def __str__(self) -> str:
        return f"{self.kind}: {self.why}"


@dataclass(frozen=True)
class State:
    """What the store holds of a run at one look: its summary (``{}``: none yet; None: one that does not
    read), whether the run is finished (its summary says so and its spec reads: a corrupt file makes it
    unfinished) and, finished, its spec as read. Taken once (:meth:`RunDir.state`) and handed on, so that
    one command reads a run once."""

    summary: dict[str, Any] | None
    finished: bool
    spec: dict[str, Any] | None = None  # read only when the summary says finished

    @property
    def status(self) -> str:
        """The run's status as ``repro run`` sees it (a corrupt summary or spec: the run is redone)."""
        if self.summary is None:
            return "corrupt summary: redone by run"
        said = self.summary.get("status", "to run")
        return "corrupt spec: redone by run" if said == FINISHED and not self.finished else said


def results_root(path: str | Path | None = None) -> Path:
    """``--results`` (``path``), else ``$REPRO_RESULTS``, else ``results``. One that is, or lies under,
    something other than a folder (a file, ``/dev/null``) is refused (UserError): nothing could be stored
    there, and reading it would find "no runs"."""
    given = "--results" if path else "$REPRO_RESULTS" if os.environ.get("REPRO_RESULTS") else "results root"
    root = Path(path or os.environ.get("REPRO_RESULTS") or "results")
    existing = next((p for p in (root, *root.parents) if os.path.lexists(p)), None)
    if existing is not None and not existing.is_dir():
        what = "is" if existing == root else f"lies under {existing}, which is"
        raise UserError(f"{given} {root}: {what} not a folder; allowed: a folder (created when absent)")
    return root


def short_names(keys: list[str]) -> dict[str, str]:
    """Grid keys as column names (reports, W&B configs): the last dotted part unless two keys share it."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: short if last.count(short) == 1 else k for k, short in zip(keys, last)}


SOURCES = "sources"  # <results>/sources/<manifest>.json: where a manifest outside experiments/ came from


def record_source(root: Path, manifest: str, path: Path, args: list[str]) -> None:
    """Remember the file (and command-line overrides) of a manifest that discovery does not find, so that
    later commands can name it by its name."""
    source = {"path": str(path.resolve()), "args": list(args)}
    if sources(root).get(manifest) != source:  # absent, different or unreadable: (re)written
        atomic.write_text(
            root / SOURCES / f"{check_name(manifest, 'manifest')}.json", json.dumps(source, indent=2) + "\n"
        )


def sources(root: Path) -> dict[str, dict[str, Any]]:
    """Manifest name -> {path, args} of every manifest the store was told about by :func:`record_source`."""
    out = {}
    for path in sorted((root / SOURCES).glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            continue  # a damaged record only loses the name lookup; the path still works
    return out


def find_run(root: Path, ref: str) -> RunDir:
    """A stored run by (a unique prefix of) its id, or by its directory. A symbolic link in place of a run's
    folder (or of its manifest's) is no stored run: never followed, and the one a lookup finds is refused
    naming it and its target (UserError, as ``repro status`` names it)."""
    path = Path(ref)
    if (path / "spec.yaml").exists():
        _refuse_linked(path)
        return RunDir(path.parent.parent.parent, path.parent.name, path.name)
    matches = [spec.parent for spec in sorted(root.glob(f"runs/*/{ref}*/spec.yaml"))]
    stored = [folder for folder in matches if not link_of(folder)]
    if not stored and matches:  # only links match: named, not counted as no run
        _refuse_linked(matches[0])
    if len(stored) != 1:
        raise UserError(f"run {ref!r} matches {len(stored)} stored runs under {root}/runs; give a longer id or a path")
    return RunDir(root, stored[0].parent.name, stored[0].name)


RUN_FOLDER, MANIFEST_FOLDER = (
    "a stored run is a folder of its own",
    "a manifest's runs are stored in a folder of its own",
)


def link_of(run: Path) -> LeftOut | None:
    """The ``linked`` line of the run folder ``run`` where it, or its manifest's folder, is a symbolic link
    (None: neither is); what every lookup of stored runs leaves out."""
    return _linked(run.parent, MANIFEST_FOLDER) or _linked(run, RUN_FOLDER)


def _refuse_linked(run: Path) -> None:
    out = link_of(run)
    if out:
        raise UserError(out.why)


class RunDir:
    """One run's directory."""

    def __init__(self, root: Path, manifest: str, run_id: str):
        self.path = root / "runs" / check_name(manifest, "manifest") / check_name(run_id, "run id")
        self.run_id = run_id

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def last_checkpoint(self) -> Path | None:
        last = self.checkpoints / "last.ckpt"
        return last if last.exists() else None

    def lock(self) -> FileLock:
        """``with run.lock() as lock:`` -- ``lock.held``, else ``lock.holder`` says who trains this run."""
        for folder in (self.path.parent, self.path):  # the lock file is the first thing written here
            atomic.refuse_link(folder)
        return FileLock(self.path / ".lock", directory=True)  # the folder's lock survives an `rm .lock`

    STORE_FILES = ("spec.yaml", "summary.json", "metrics.csv", "analysis.npz", "checkpoints", "samples")

    def refuse_links(self) -> None:
        """A symbolic link where a file or folder of the run is expected (pointing out of the store) is
        refused (StoreError naming it)."""
        atomic.refuse_link(self.path)
        for name in self.STORE_FILES:
            atomic.refuse_link(self.path / name)
        if self.checkpoints.is_dir():
            for path in self.checkpoints.iterdir():
                atomic.refuse_link(path)

    def clean_temps(self) -> list[Path]:
        """Remove what killed writers left (temp files, Lightning's hand-over file). Under the lock only."""
        removed = atomic.clean_temps(self.path) + atomic.clean_temps(self.checkpoints)
        if (self.path / LIGHTNING_TEMP).exists():
            (self.path / LIGHTNING_TEMP).unlink()
            removed.append(self.path / LIGHTNING_TEMP)
        return removed

    def summary(self) -> dict[str, Any]:
        path = self.path / "summary.json"
        raw = _stored(path)
        if raw is None:
            return {}
        try:
            summary = json.loads(raw)
        except (ValueError, RecursionError) as err:
            raise CorruptFile(f"{path}: corrupt ({_reason(err)})") from None
        if not isinstance(summary, dict):
            raise CorruptFile(f"{path}: corrupt (expected a JSON object)")
        if summary.get("run_id", self.run_id) != self.run_id:
            raise CorruptFile(f"{path}: names run {str(summary['run_id'])[:40]!r}, not its folder's {self.run_id}")
        return summary

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic.write_text(self.path / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")

    def update_summary(self, **values: Any) -> dict[str, Any]:
        summary = {**self.summary(), **values}
        self.write_summary(summary)
        return summary

    def write_spec(self, spec: dict[str, Any]) -> None:
        atomic.write_text(self.path / "spec.yaml", yaml.safe_dump(spec, sort_keys=False))

    def spec(self) -> dict[str, Any]:
        path = self.path / "spec.yaml"
        if not path.exists():
            raise CorruptFile(f"{path}: missing")
        try:
            spec = safeyaml.read(path)
        except safeyaml.YamlError as err:
            raise CorruptFile(f"{path}: corrupt ({str(err).split(': ', 1)[-1]})") from None
        if not isinstance(spec, dict):
            raise CorruptFile(f"{path}: corrupt (expected a mapping)")
        hashed = spec_id(spec)
        if hashed != self.run_id or spec.get("run_id") != self.run_id:
            named = str(spec.get("run_id"))[:40]
            raise CorruptFile(
                f"{path}: the spec hashes to {hashed} (and names {named}), not its folder's {self.run_id}: "
                "copied from another run or edited after training"
            )
        return spec

    def write_arrays(self, name: str, arrays: dict[str, Any]) -> None:
        """Numpy arrays of a run (e.g. attention statistics for a figure), written atomically."""
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        atomic.write_bytes(self.path / name, buffer.getvalue())

    def arrays(self, name: str) -> dict[str, Any]:
        with np.load(self.path / name) as npz:
            return {k: npz[k] for k in npz.files}

    def adopt(self, source: RunDir, record: dict[str, Any]) -> dict[str, Any]:
        """Take over a finished run of the same computation stored under another manifest or id
        (:func:`repro.store.computation.provides`): its files copied, the spec this run's own ``record``
        (its id, manifest, scale, cell and sections) with the source's code version, the summary the
        source's with this run's names and ``reused_from: <manifest>/<run_id>``. The figure arrays come
        along from a run of the same family, the checkpoint (hard-linked when possible) from the same id."""
        same_family = (source.spec().get("model") or {}).get("family") == record["model"]["family"]
        for name in ("metrics.csv", *(("analysis.npz",) if same_family else ())):
            if (source.path / name).exists():
                atomic.write_bytes(self.path / name, (source.path / name).read_bytes())
        if source.last_checkpoint is not None and source.run_id == self.run_id:
            atomic.make_dirs(self.checkpoints)
            # another filesystem (or already linked): `repro sample` then needs the source run's
            with contextlib.suppress(OSError):
                os.link(source.last_checkpoint, self.checkpoints / "last.ckpt")
        self.write_spec({**record, "code_version": source.spec().get("code_version")})
        names = {key: record[key] for key in ("run_id", "manifest", "scale", "cell")}
        origin = f"{source.path.parent.name}/{source.run_id}"
        summary = {**source.summary(), **names, "family": record["model"]["family"], "reused_from": origin}
        self.write_summary(summary)
        return summary

    def state(self) -> State:
        """The run's :class:`State`: its summary and (when it says finished) its spec read now."""
        try:
            summary = self.summary()
        except CorruptFile:
            return State(None, False)
        try:
            spec = self.spec() if summary.get("status") == FINISHED else None
        except CorruptFile:
            return State(summary, False)
        return State(summary, spec is not None, spec)

    @property
    def finished(self) -> bool:
        """The summary says finished and the spec reads (a corrupt file makes the run unfinished)."""
        return self.state().finished

    # metrics.csv: one row per logged step; columns grow as new metrics appear. Rows reach the file
    # with each checkpoint (appended, fsynced); a (re)start cuts what lies beyond its checkpoint.
    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.csv"

    UNREADABLE = "metrics.unreadable.csv"  # lines of metrics.csv that did not read, set aside by the cut

    def metrics(self) -> pd.DataFrame:
        """The rows of metrics.csv that read (a damaged line is left out, never a crash)."""
        return self._read_metrics()[0]

    def _read_metrics(self) -> tuple[pd.DataFrame, list[bytes], bool]:
        """(the complete rows that read, the lines that did not, whether the last line was torn)."""
        atomic.refuse_link(self.metrics_path)
        raw = _stored(self.metrics_path)
        return parse_metrics(raw) if raw is not None else (pd.DataFrame(), [], False)

    def append_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Append rows (fsynced), rewriting the file atomically when a new column appears."""
        if not rows:
            return
        old = self.metrics()
        columns = list(old.columns) if not old.empty else []
        new_cols = [k for row in rows for k in row if k not in columns]
        if new_cols or old.empty:
            merged = pd.concat([old, pd.DataFrame(rows)], ignore_index=True)
            atomic.write_text(self.metrics_path, merged.to_csv(index=False))
            return
        text = io.StringIO()
        csv.DictWriter(text, fieldnames=columns, lineterminator="\n").writerows(rows)
        fd = atomic.open_nofollow(self.metrics_path, os.O_WRONLY | os.O_APPEND, "cannot write")
        try:
            with os.fdopen(fd, "a", newline="") as fh:
                fh.write(text.getvalue())
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as err:
            raise atomic.store_error(self.metrics_path, err) from None

    def cut_metrics(self, before_step: int, echo: Callable[[str], None] = lambda line: None) -> None:
        """Keep the complete rows logged before ``before_step`` (the step a run restarts from): a torn
        last line, and rows a killed run logged beyond its checkpoint, go. Lines that do not read are
        set aside in metrics.unreadable.csv, and a file that holds no row before a resumed checkpoint
        is named, each with a line to ``echo``: good rows are never dropped silently."""
        if not self.metrics_path.exists():
            if before_step > 0:
                echo(f"  {self.metrics_path}: missing: the metrics before step {before_step} are lost")
            return
        old, bad, torn = self._read_metrics()
        kept = old[pd.to_numeric(old["step"], errors="coerce") < before_step] if not old.empty else old
        if bad:
            aside = self.path / self.UNREADABLE
            earlier = aside.read_bytes() if aside.exists() and not aside.is_symlink() else b""
            atomic.write_bytes(
                aside, earlier + b"".join(line if line.endswith(b"\n") else line + b"\n" for line in bad)
            )
            echo(
                f"  {self.metrics_path}: {len(bad)} line(s) do not read: set aside in {aside}; "
                f"{len(kept)} readable row(s) before step {before_step} kept"
            )
        elif before_step > 0 and kept.empty:
            echo(f"  {self.metrics_path}: no row before step {before_step} (empty): those metrics are lost")
        if kept.empty:
            self.metrics_path.unlink()
        elif bad or torn or len(kept) < len(old):
            atomic.write_text(self.metrics_path, kept.to_csv(index=False))


def _stored(path: Path) -> bytes | None:
    """The bytes of the store file ``path`` (None: there is none), read from a regular file only: anything
    else (a FIFO, opened without blocking and never read; a device; a folder), or a file that does not
    read, is CorruptFile naming it (:func:`repro.files.safeyaml.read_bounded`)."""
    if not os.path.lexists(path):
        return None
    return safeyaml.read_bounded(path, None, CorruptFile)


def parse_metrics(raw: bytes) -> tuple[pd.DataFrame, list[bytes], bool]:
    """metrics.csv's bytes as (its rows that read, its lines that do not, whether the last line is torn).
    A row reads when it has the header's number of fields, each a number or empty, its step a number;
    the header reads when it names ``step``. Our rows never quote, so a line is parsed on its own (an
    unbalanced quote spoils that line only)."""
    lines = raw.splitlines(keepends=True)
    torn = bool(lines) and not lines[-1].endswith(b"\n")
    if torn:
        lines = lines[:-1]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return pd.DataFrame(), [], torn
    header = _fields(lines[0])
    if not header or "step" not in header or len(set(header)) != len(header):
        return pd.DataFrame(), lines, torn
    good, bad = [], []
    for line in lines[1:]:
        row = _fields(line)
        ok = row is not None and len(row) == len(header) and all(_number(v) for v in row)
        ok = ok and row[header.index("step")] != ""
        (good if ok else bad).append(line)
    if not good:
        return pd.DataFrame(columns=header), bad, torn
    text = b"".join([lines[0], *good]).decode()
    return pd.read_csv(io.StringIO(text)), bad, torn


def _fields(line: bytes) -> list[str] | None:
    try:
        (row,) = csv.reader([line.decode("utf-8").rstrip("\r\n")], strict=True)
    except (UnicodeDecodeError, csv.Error, ValueError):
        return None
    return row


def _number(value: str) -> bool:
    if value == "":
        return True
    try:
        float(value)
    except ValueError:
        return False
    return True


def _reason(err: Exception) -> str:
    return err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0][:200]


def scan(root: Path, manifest: str | None = None) -> tuple[pd.DataFrame, list[LeftOut]]:
    """The tidy table of the store: one row per readable stored run with manifest, run_id, scale, the
    grid cell's keys, the resolved spec flattened into dotted columns (``model.span.limit``), then every
    key of the summary (lists such as per-head spans included); and, apart, the runs left out: those
    whose spec or summary is corrupt (does not parse, is missing, or is not the spec its folder names)
    and those this user may not read."""
    found, left = listing(root, manifest)
    return pd.DataFrame([row for row, _ in found]), left


def listing(
    root: Path, manifest: str | None = None
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[LeftOut]]:
    """:func:`scan`'s rows as (row, grid cell) pairs, in store order, and the runs it leaves out. Each
    manifest folder's :mod:`repro.store.index` spares reading the runs whose files did not change."""
    base = root / "runs"
    folders = [base / manifest] if manifest else _folders(base)
    found, left = [], []
    for folder in folders:
        out = _linked(folder, MANIFEST_FOLDER) or _unreadable(folder)
        if out:  # a manifest's folder that is a link or this user may not read: the others are served
            left.append(out)
            continue
        paths = _folders(folder)
        named = is_plain(folder.name)  # else: no index
        known = index.load(root, folder.name) if named else {}
        kept, changed = {}, False
        for path in paths:
            out = _linked(path, RUN_FOLDER) or _unreadable(path) or _damaged(path)
            if out:  # not kept in the index: looked at again by the next scan
                left.append(out)
                continue
            stamps = [index.stamp(path / "spec.yaml"), index.stamp(path / "summary.json")]
            entry = known.get(path.name)
            if entry is None or entry.get("stamps") != stamps:
                entry = _entry(root, path, stamps)
                changed = changed or entry is not None
            if entry is None:
                continue
            kept[path.name] = entry
            if "corrupt" in entry:
                left.append(LeftOut("corrupt", entry["corrupt"]))
            else:
                found.append((entry["row"], entry["cell"]))
        if named and (changed or len(kept) != len(known)):
            index.save(root, folder.name, kept)
    return found, left


def refresh_index(root: Path, manifest: str) -> None:
    """Bring a manifest folder's index up to date (only its changed runs are read): called when a run
    finishes, so that a store grown by training answers `status` and `report` from its index. A cache:
    what it cannot read or write costs only time."""
    with contextlib.suppress(UserError, OSError):
        listing(root, manifest)


def _folders(folder: Path) -> list[Path]:
    """The folders in ``folder``, sorted, but for hidden ones (temp folders)."""
    try:
        return sorted(Path(e.path) for e in os.scandir(folder) if not e.name.startswith(".") and e.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as err:
        raise CorruptFile(f"{folder}: unreadable ({_reason(err)})") from None


def _linked(path: Path, what: str) -> LeftOut | None:
    """A symbolic link at the store's folder ``path``, named with where it points (never followed: what is
    stored there is ``what``), or None."""
    if not path.is_symlink():
        return None
    try:
        target = os.readlink(path)
    except OSError as err:
        target = f"? ({_reason(err)})"
    return LeftOut("linked", f"{path} is a link to {target}: not read; {what}")


def _unreadable(path: Path) -> LeftOut | None:
    """Why this user may not read the folder ``path`` (its listing, a run's spec or summary), or None."""
    try:
        names = set(os.listdir(path))
    except PermissionError as err:
        return LeftOut("unreadable", f"{path}: {err.strerror}")
    except OSError:  # absent, or not a folder: not this check's to tell
        return None
    for name in ("spec.yaml", "summary.json"):
        if name in names and not os.access(path / name, os.R_OK):
            return LeftOut("unreadable", f"{path / name}: Permission denied")
    return None


DATA_FILES = ("metrics.csv", "analysis.npz")  # what a report reads of a run beside its spec and summary


def _damaged(path: Path) -> LeftOut | None:
    """The run ``path`` left out for a :func:`data_fault`, or None. Looked at by every scan, never kept in
    the index: the index goes by the spec's and the summary's stamps. A FIFO in place of the spec or the
    summary makes the run corrupt instead (:func:`_stored`): ``repro run`` redoes it."""
    fault = data_fault(path)
    return LeftOut("damaged", f"{fault}: run left out", path) if fault else None


def data_fault(path: Path) -> str | None:
    """What stands in place of the run ``path``'s metrics.csv or analysis.npz where it is no regular file
    (a FIFO, a device, a folder or a link: a report's curves and figures would block on a FIFO or fail, a
    reuse copying it would hang), naming the file; None when each is a regular file or absent. Never opens them."""
    for name in DATA_FILES:
        try:
            mode = os.lstat(path / name).st_mode
        except OSError:  # absent (a run without figure arrays), or a folder this check may not search
            continue
        if not stat.S_ISREG(mode):
            return f"{path / name} is {safeyaml.not_regular(mode)}, not a regular file"
    return None


def _entry(root: Path, path: Path, stamps: list) -> dict[str, Any] | None:
    """What a scan keeps of the run folder ``path``: its row and cell, or why it is corrupt (None: a
    folder that holds nothing of a run yet, such as a lock taken before the spec is written)."""
    if stamps[0] is None and not any((path / name).exists() for name in RunDir.STORE_FILES):
        return None
    try:
        run = RunDir(root, path.parent.name, path.name)
        spec, summary = run.spec(), run.summary()
    except UserError as err:
        return {"stamps": stamps, "corrupt": str(err)}
    cell = spec.get("cell") if isinstance(spec.get("cell"), dict) else {}
    row = {
        "manifest": run.path.parent.name,
        "run_id": run.run_id,
        "scale": spec.get("scale"),
        "code_version": spec.get("code_version"),
        "computation": computation(spec),
        **cell,
        "status": summary.get("status", "pending"),
    }
    for section in SECTIONS:
        row.update(_flatten(spec.get(section) or {}, section))
    row.update({k: v for k, v in summary.items() if k not in row and not isinstance(v, dict)})
    return {"stamps": stamps, "row": row, "cell": cell}


def table(root: Path, manifest: str | None = None) -> pd.DataFrame:
    """:func:`scan`'s rows of the readable runs."""
    return scan(root, manifest)[0]


def _flatten(tree: dict[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}"
        out.update(_flatten(value, name) if isinstance(value, dict) else {name: value})
    return out
