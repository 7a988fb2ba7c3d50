"""Manifests: one YAML per paper table/figure/ablation, expanded into RunSpecs.

``base`` is the paper's configuration, ``grid`` maps dotted keys to value lists (cartesian product),
``scales`` deep-merge overrides into ``base`` (a scale may also replace grid lists with its own ``grid``),
``reference`` holds the paper's numbers, ``claims`` the paper's findings as checks (:mod:`repro.grammar.language`).
The scale ``paper`` is ``base`` itself unless the manifest overrides it. A manifest without ``base``
trains nothing: its renderers draw from the manifest alone (e.g. a mask function, a pattern picture).
``renders`` names renderers: the shipped ones (the files of the repository's ``analysis/``) and those
of the files that ``analysis:`` (a path or a list, relative to the file) names, a manifest's own.

``include:`` (a path or a list, relative to the file) deep-merges other files under this one: shared
fragments (``experiments/shared/``: a paper's recipe and scales) or whole manifests. Mappings merge key
by key, anything else is replaced; ``notes`` accumulate (the included file's first; each file's kept apart
too, so that a report labels the notes an included file brought). ``set`` (dotted key
-> value: every run at every scale has it) and ``sweep`` (dotted key -> list: a grid axis at every scale,
added or replacing the manifest's) are the command line's ``key=value`` and ``-m key=v1,v2`` in a file.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import hashlib
import itertools
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.bounds import MAX_CELLS, MAX_CORPUS_BYTES, MAX_INCLUDES
from repro.config import claim_checks, fields
from repro.config.access import NONE, Access
from repro.config.cells import cell_text
from repro.config.document import VARIANT, Document, scale_grid, scale_names
from repro.config.looks import Looks, looks_of
from repro.config.spec import RunSpec, SpecError, build_run
from repro.errors import UserError
from repro.files import safeyaml
from repro.identity import check_name

DEFAULT_SCALE = "tiny"  # the scale commands use unless given --scale
NOTES_FROM = "_notes_from"  # a merged document's notes by file: [(path, text)], the included files' first
SHARED = "shared"  # experiments/shared/: fragments for `include:`, not manifests
LOCAL = "local"  # experiments/local/: the user's own manifests (ignored by git), found by name, not shipped
SHIPPED = Path(__file__).resolve().parents[2] / "experiments"
ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"  # the shipped renderer files


def experiments_root() -> Path:
    """Where manifests are discovered: ``$REPRO_EXPERIMENTS`` or the repository's experiments/."""
    return Path(os.environ.get("REPRO_EXPERIMENTS") or SHIPPED)


def analysis_root() -> Path:
    """Where the shipped renderer files are: ``$REPRO_ANALYSIS`` or the repository's analysis/."""
    return Path(os.environ.get("REPRO_ANALYSIS") or ANALYSIS)


def code_roots(trusted: tuple[Path, ...] = ()) -> list[Path]:
    """The folders whose renderer files any manifest may name (``docs/faults.md``, the trust model): the
    project's analysis/, ``$REPRO_ANALYSIS``, and the ``trusted`` ones (``--trust-code``, :class:`Access`)."""
    return [
        Path(p).expanduser().resolve() for p in dict.fromkeys([str(ANALYSIS), str(analysis_root()), *map(str, trusted)])
    ]


class ManifestError(UserError):
    pass


@dataclass
class Claim:
    id: str
    text: str
    check: str
    scales: list[str] | None = None  # judged only at these scales (None: every scale)
    requires: list[str] = field(default_factory=list)  # preconditions (the manifest's, then the claim's)
    controls: list[str] = field(default_factory=list)  # comparisons a reproduced claim must also pass
    sesoi: float | None = None  # the smallest effect of interest (None: its metric's default)


@dataclass
class Manifest:
    name: str
    title: str
    paper: str
    path: Path
    base: dict[str, Any] | None
    grid: dict[str, list[Any]] = field(default_factory=dict)
    scales: dict[str, dict[str, Any]] = field(default_factory=dict)
    renders: list[str] = field(default_factory=list)
    analysis: list[Path] = field(default_factory=list)  # the manifest's own renderer files (repro.report.renderers)
    reference: dict[str, Any] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)  # manifests whose runs this one's renderers gather
    description: str = ""
    notes: str = ""
    notes_from: list[tuple[Path, str]] = field(default_factory=list)  # each file's own notes, includes first
    set: dict[str, Any] = field(default_factory=dict)  # dotted key -> the value of every run
    sweep: dict[str, list[Any]] = field(default_factory=dict)  # dotted key -> an axis of every scale's grid
    args: list[str] = field(default_factory=list)  # the command-line overrides it was derived with
    seeds: int | dict = 1  # replicates of every grid cell, or its looks (a scale's `seeds` replaces it there)
    split: str = "test"  # the one split its claims are judged on (repro.grammar.language.SPLITS)
    folders: list[Path] = field(default_factory=list)  # of the files merged into it: where it may read
    headline: str | None = None  # the claim id REPORT.md's first table shows (default: the first finding)
    declared_family: str | None = None  # the family its findings are adjusted in, as declared (`family:`)
    access: Access = NONE  # the folders the user allowed beyond its own (--allow-read, --trust-code)
    # scale -> its runs and left-out cells: a manifest expands once per scale (build checks every scale)
    _expanded: dict[str, tuple] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def family(self) -> str:
        """The family REPORT.md adjusts its findings in: the declared one, else its paper."""
        return self.declared_family or self.paper

    def read_roots(self) -> list[Path]:
        """The folders whose files a `file` corpus may be (``docs/faults.md``): the folder of every file
        merged into this manifest (itself and its includes), and each folder of ``access.read``."""
        return list(dict.fromkeys([*self.folders, *self.access.read]))

    @property
    def command(self) -> str:
        """How the command line names it: its name where discovery finds this file (else its path), then
        the overrides it was derived with."""
        here = self.path.resolve()
        names = [n for n, p in discover().items() if p.resolve() == here]
        shown = os.path.relpath(here) if not os.path.relpath(here).startswith("..") else str(here)
        return " ".join([names[0] if names else shown, *self.args])

    def grid_for(self, scale: str, overrides: bool = True) -> dict[str, list[Any]]:
        """The grid at ``scale``; with ``overrides``, ``sweep`` axes added or replaced and the ``set`` keys
        that are axes narrowed to their one value."""
        grid = scale_grid(self.grid, self.scales, scale)
        if not overrides:
            return grid
        grid.update(self.sweep)
        return {k: [self.set[k]] if k in self.set else v for k, v in grid.items()}

    def claim_warnings(self) -> list[str]:
        """What ``repro validate`` warns of: claims that can hold by construction (docs/manifests.md)."""
        out = []
        for claim in self.claims:
            keys = list(dict.fromkeys(k for s in self.scale_names() for k in self.grid_for(s)))
            out += [f"claims {claim.id}: {w}" for w in claim_checks.by_construction(claim.check, keys)]
        return out

    def replicates(self, scale: str) -> int:
        """How many seeds each grid cell runs at ``scale`` (with looks declared: the first look's)."""
        return self.looks(scale).counts[0]

    def looks(self, scale: str) -> Looks:
        """The seed counts at which ``scale``'s verdicts may be read (repro.claims.sequential)."""
        return looks_of(self.scales.get(scale, {}).get("seeds") or self.seeds)

    def expand(self, scale: str, seeds: int | None = None) -> list[RunSpec]:
        """Every run of the manifest at ``scale``: each grid cell in grid order (a derived manifest's: those
        its overrides leave valid, see :meth:`left_out`), then (``seeds`` replicates, default
        :meth:`replicates`) the same cells again with ``train.seed`` + 1, + 2, ... The first replicate is
        the spec itself, so its run id is the one a single-seed manifest gives."""
        cells, left = self._expand(scale)
        last = self.looks(scale).counts[-1]
        if seeds is not None and self.looks(scale).sequential and seeds > last:
            raise ManifestError(
                f"{self.name}: --seeds {seeds} is beyond the last look its scale {scale} declares ({last} seeds: "
                f"{self.looks(scale).text()}); training more would be a look no boundary spends for"
            )
        if left and not cells:
            raise left[0][1]
        out = list(cells)
        for replicate in range(1, self.replicates(scale) if seeds is None else seeds):
            out += [_reseeded(run, replicate) for run in cells]
        return out

    def left_out(self, scale: str) -> list[tuple[dict[str, Any], ManifestError]]:
        """The grid cells at ``scale`` that this derived manifest's overrides make invalid (``train.steps=80``
        below one variant's ``final_phase``), each with why: left out, so that ``--only`` can pick the valid
        ones; a manifest without overrides has none (an invalid cell is its error)."""
        return list(self._expand(scale)[1])

    def _expand(self, scale: str) -> tuple[list[RunSpec], list[tuple[dict[str, Any], ManifestError]]]:
        """One run per grid cell at ``scale``, in grid order (the first replicate), and the cells left out:
        built once per scale, so that a command expands each manifest once (a RunSpec is never changed
        in place: a changed run is a new one, ``dataclasses.replace``)."""
        if scale not in self._expanded:
            self._expanded[scale] = self._build_runs(scale)
        return self._expanded[scale]

    def _build_runs(self, scale: str) -> tuple[list[RunSpec], list[tuple[dict[str, Any], ManifestError]]]:
        if scale not in self.scale_names():
            default = " (the default)" if scale == DEFAULT_SCALE else ""
            raise ManifestError(
                f"{self.name} ({self.path}) has no scale {scale!r}{default}; pass --scale "
                f"{self.scale_names()[0]} (its scales: {', '.join(self.scale_names())})"
            )
        if self.base is None:
            return [], []
        overrides = {k: v for k, v in self.scales.get(scale, {}).items() if k not in ("grid", "seeds")}
        config = _merge(copy.deepcopy(self.base), overrides)
        grid = self.grid_for(scale)
        cells = math.prod(len(v) for v in grid.values())
        if cells > MAX_CELLS:
            raise ManifestError(
                f"{self.path}: grid: {cells:,} runs at scale {scale}; allowed: at most {MAX_CELLS:,} "
                "(the product of the grid's list lengths)"
            )
        runs, left = [], []
        for values in itertools.product(*grid.values()):
            given = dict(zip(grid, values))
            cell = {k: v["name"] if k == VARIANT else v for k, v in given.items()}
            resolved = copy.deepcopy(config)
            try:
                for key, value in given.items():
                    for k, v in value.items() if key == VARIANT else [(key, value)]:
                        if not (key == VARIANT and k == "name"):
                            set_key(resolved, k, v)
                for key, value in self.set.items():
                    set_key(resolved, key, value)
                run = build_run(self.name, scale, cell, resolved)
            except SpecError as err:
                where = f" (scale {scale}, grid cell {cell_text(cell)})" if cell else f" (scale {scale})"
                error = ManifestError(f"{self.path}: {err}{where}")
                if not (self.set or self.sweep):
                    raise error from None
                left.append((cell, error))
                continue
            runs.append(self._pin_file(run) if run.data.name == "file" else run)
        return runs, left

    def _pin_file(self, run: RunSpec) -> RunSpec:
        """A `file` corpus: its path resolved against this manifest's folder and its sha256 recorded."""
        if not run.data.path:
            raise ManifestError(f"{self.path}: data.path: a `file` dataset needs the corpus's path")
        path = (self.path.parent / Path(run.data.path).expanduser()).resolve()
        roots = self.read_roots()
        if not any(path.is_relative_to(root) for root in roots):
            raise ManifestError(
                f"{self.path}: data.path: {path} lies outside the folders this manifest may read "
                f"({', '.join(map(str, roots))}); allowed: a file under one of them, or name its folder with "
                "--allow-read DIR"
            )
        try:
            digest = _sha256(path)
        except (OSError, ValueError) as err:
            raise ManifestError(f"{self.path}: data.path: {path}: {getattr(err, 'strerror', None) or err}") from None
        if run.data.sha256 not in (None, digest):  # the manifest pins the content: it changed
            raise ManifestError(f"{self.path}: data.sha256: {path} has sha256 {digest}, expected {run.data.sha256}")
        return dataclasses.replace(run, data=run.data.model_copy(update={"path": str(path), "sha256": digest}))

    def scale_names(self) -> list[str]:
        return scale_names(self.scales)


def _reseeded(run: RunSpec, replicate: int) -> RunSpec:
    """Replicate ``replicate`` of a run: its seed moved by that much (a new run id, the same cell)."""
    return dataclasses.replace(run, train=run.train.model_copy(update={"seed": run.train.seed + replicate}))


def load(path: str | Path, access: Access = NONE) -> Manifest:
    """Read and validate one manifest file, its includes merged (every scale is expanded once to check
    it); ``access``: the folders the user allowed beyond its own."""
    path, folders = Path(path), []
    return build(read(path, folders=folders, access=access), path, folders=folders, access=access)


def read(
    path: Path, _seen: tuple[Path, ...] = (), folders: list[Path] | None = None, access: Access = NONE
) -> dict[str, Any]:
    """A manifest file's document with its ``include:`` files merged under it (recursively); the folder
    of every file read is appended to ``folders``. At most MAX_INCLUDES files are read in all; renderer
    files (``analysis:``) may lie in its folder, analysis/ and the folders of ``access.code``."""
    folders = [] if folders is None else folders
    here = _resolved(path, str(path))
    folders.append(here.parent)
    if len(folders) > MAX_INCLUDES:
        raise ManifestError(
            f"{path}: include: more than {MAX_INCLUDES} files read in all; allowed: at most {MAX_INCLUDES}"
        )
    data = _read_yaml(path)
    allowed = set(Document.model_fields) | {"include"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ManifestError(f"{path}: {unknown[0]}: unknown key; allowed keys: {', '.join(sorted(allowed))}")
    if "analysis" in data:
        data["analysis"] = _analysis_files(path, data["analysis"], access.code)
    if data.get("notes"):  # whose notes they are: a report labels those an included file brought
        data[NOTES_FROM] = [(path.resolve(), str(data["notes"]))]
    includes = data.pop("include", [])
    includes = [includes] if isinstance(includes, str) else includes
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ManifestError(f"{path}: include: expected a path or a list of paths (relative to {path.parent})")
    both = sorted(set(data.get("set") or {}) & set(data.get("sweep") or {}))
    if both:
        raise ManifestError(f"{path}: {both[0]}: both in set and in sweep; give it one of them")
    merged: dict[str, Any] = {}
    for ref in includes:
        target = _resolved(path.parent / ref, f"{path}: include: {ref}")
        if target in _seen or target == here:
            raise ManifestError(f"{path}: include: {ref}: includes itself (a cycle)")
        if not target.is_file():  # a device (/dev/zero), a FIFO or a folder is there, but no manifest
            what = "not a regular file; allowed: a regular file" if target.exists() else "no such file"
            raise ManifestError(f"{path}: include: {ref}: {what} ({target})")
        merged = merge_documents(merged, _absolute_paths(read(target, (*_seen, here), folders, access), target.parent))
    return merge_documents(merged, data)


def _resolved(path: Path, where: str) -> Path:
    """``path`` with its symbolic links resolved; one line naming ``where`` for a loop of links."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # a loop (RuntimeError before Python 3.13, OSError ELOOP since)
        raise ManifestError(f"{where}: a loop of symbolic links; allowed: a regular file") from None


def _analysis_files(path: Path, value: Any, trusted: tuple[Path, ...]) -> list[str]:
    """``analysis:`` (a path or a list, relative to the file): renderer files, as absolute paths."""
    files = [value] if isinstance(value, str) else value
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise ManifestError(f"{path}: analysis: expected a path or a list of paths of renderer files (.py)")
    out = []
    folder = path.parent.resolve()
    for ref in files:
        target = (path.parent / Path(ref).expanduser()).resolve()
        if target.suffix != ".py" or not target.is_file():
            raise ManifestError(f"{path}: analysis: {ref}: no such renderer file ({target}; expected a .py file)")
        if not any(target.is_relative_to(root) for root in [folder, *code_roots(trusted)]):
            raise ManifestError(
                f"{path}: analysis: {ref}: {target} lies outside the manifest's folder ({folder}); a renderer "
                "file is code, run only from there, the project's analysis/, $REPRO_ANALYSIS or a folder named "
                "with --trust-code DIR"
            )
        out.append(str(target))
    return out


def merge_documents(under: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` deep-merged over ``under``: notes accumulate; a key ``over`` sets (or sweeps) leaves the
    other of ``set``/``sweep``."""
    out = _merge(copy.deepcopy(under), {k: v for k, v in over.items() if k not in ("notes", NOTES_FROM)})
    if over.get("notes"):
        out["notes"] = str(under.get("notes") or "") + str(over["notes"])
    if over.get(NOTES_FROM):
        out[NOTES_FROM] = [*(under.get(NOTES_FROM) or []), *over[NOTES_FROM]]
    for key, other in (("set", "sweep"), ("sweep", "set")):
        for dotted in over.get(key) or {}:
            (out.get(other) or {}).pop(dotted, None)
    return out


def _absolute_paths(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """An included file's `file` corpus paths made absolute (they are relative to that file's folder)."""
    sections = [data.get("base")] + list((data.get("scales") or {}).values())
    for section in sections:
        corpus = (section or {}).get("data") if isinstance(section, dict) else None
        if isinstance(corpus, dict) and isinstance(corpus.get("path"), str):
            corpus["path"] = str(folder / Path(corpus["path"]).expanduser())
    return data


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = safeyaml.read(path)
    except safeyaml.YamlError as err:
        raise ManifestError(str(err)) from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: expected a mapping at the top level")
    return data


def build(
    data: dict[str, Any], path: Path, args: list[str] = (), folders: list[Path] = (), access: Access = NONE
) -> Manifest:
    """A validated Manifest from a merged document; ``path`` names it in errors and anchors `file` corpora
    (which may lie in ``folders``, those of the files merged, and in ``access.read``)."""
    notes_from = list(data.get(NOTES_FROM) or [])
    try:
        doc = fields.build(Document, {k: v for k, v in data.items() if k != NOTES_FROM})
    except SpecError as err:
        raise ManifestError(f"{path}: {err}") from None
    try:
        check_name(doc.name)
    except UserError as err:
        raise ManifestError(f"{path}: {err}") from None
    manifest = Manifest(
        name=doc.name,
        title=doc.title,
        paper=doc.paper,
        path=path,
        base=doc.base,
        grid=doc.grid,
        scales=doc.scales,
        renders=doc.renders,
        analysis=[Path(p) for p in doc.analysis],
        reference=data.get("reference") or {},  # as written: the renderers read it
        claims=[
            Claim(
                id=i,
                text=c.text,
                check=c.check,
                scales=c.scales,
                requires=list(dict.fromkeys([*doc.requires, *c.requires])),
                controls=list(c.controls),
                sesoi=c.sesoi,
            )
            for i, c in zip(doc.claim_ids(), doc.claims)
        ],
        parts=doc.parts,
        description=doc.description,
        notes=doc.notes,
        notes_from=notes_from,
        set=doc.set,
        sweep=doc.sweep,
        args=list(args),
        folders=list(dict.fromkeys([path.resolve().parent, *folders])),
        seeds=doc.seeds,
        split=doc.split,
        headline=None if doc.headline is None else str(doc.headline),
        declared_family=doc.family,
        access=access,
    )
    expanded = [manifest._expand(scale) for scale in manifest.scale_names()]  # an invalid cell raises here
    if not any(runs for runs, _ in expanded) and any(left for _, left in expanded):  # overrides that leave no run
        raise next(left[0][1] for _, left in expanded if left)
    return manifest


@functools.lru_cache(maxsize=64)
def _sha256_of(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    """A file's sha256, hashed once per (path, size, mtime): a manifest expands at every scale. A
    corpus is a regular file of at most MAX_CORPUS_BYTES (ValueError otherwise)."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file; allowed: a regular file")
    if st.st_size > MAX_CORPUS_BYTES:
        raise ValueError(f"{st.st_size:,} bytes; allowed: at most {MAX_CORPUS_BYTES:,} bytes")
    return _sha256_of(path, st.st_size, st.st_mtime_ns)


def _merge(base: dict, over: dict) -> dict:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def set_key(tree: dict, dotted: str, value: Any) -> None:
    """Set the dotted key in ``tree`` (a copy of ``value``), its missing parents made; SpecError when a key
    on its way holds a value, not a section."""
    *parents, last = dotted.split(".")
    node = tree
    for depth, part in enumerate(parents, 1):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            where = ".".join(parents[:depth])
            raise SpecError(dotted, f"{where} is {node!r:.40}, not a section of keys; allowed: a key of a section")
    node[last] = copy.deepcopy(value)


# -- the registry of manifests ---------------------------------------------------------------


def discover(root: Path | None = None, local: bool = True) -> dict[str, Path]:
    """Every manifest under ``root`` (default: :func:`experiments_root`) by name (its ``name`` key); the
    fragments under ``shared/`` are not manifests, and the user's own under ``local/`` are left out
    without ``local`` (the shipped ones alone)."""
    root = root or experiments_root()
    skipped = {SHARED} if local else {SHARED, LOCAL}
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.yaml")):
        if path.relative_to(root).parts[0] in skipped:
            continue
        try:
            name = (safeyaml.read(path) or {}).get("name")
        except (UserError, AttributeError):
            name = None
        found[name if isinstance(name, str) else str(path)] = path
    return found


def is_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml")) or os.sep in ref


def matching(ref: str, known: dict[str, Any]) -> list[str]:
    """The names ``ref`` selects: itself when known, else every name it is a suffix of (a group)."""
    return [ref] if ref in known else sorted(n for n in known if n.endswith(ref))


def unknown(ref: str, known: dict[str, Any]) -> ManifestError:
    close = difflib.get_close_matches(ref, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(known))}"
    return ManifestError(f"unknown manifest {ref!r}{hint}")


def resolve(ref: str, root: Path | None = None, access: Access = NONE) -> Manifest:
    """One manifest by name, path, or unique suffix of its name (``ablate-ramp`` -> ``as-ablate-ramp``)."""
    if is_path(ref):
        if not Path(ref).exists():
            raise ManifestError(f"{ref}: no such manifest file")
        return load(ref, access)
    known = discover(root)
    matches = matching(ref, known)
    if len(matches) == 1:
        return load(known[matches[0]], access)
    if len(matches) > 1:
        raise ManifestError(f"{ref!r} is ambiguous: {', '.join(matches)}; name one of them")
    raise unknown(ref, known)
