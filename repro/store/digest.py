"""The computation digest: a hash of the code a run executes (issue 59), computed statically from source,
so that two runs are compared by what they computed, not by the commit that happened to hold the code.

``digest(spec, commit)`` -> 12 hex digits; ``commit=None`` reads the package's files as they are on disk
(the code a run started now executes), a commit reads them from git (``git ls-tree -r`` and one
``git cat-file --batch`` per commit, cached per commit), so every committed stored run gets a digest
retroactively. A ``+dirty`` run gets none: what it ran is recorded nowhere.

**Units.** Every top-level function, class (with all its methods) and module-level assignment
(constants and defaults count) of every module under ``repro/``; top-level statements of another kind
(a call, an ``if``'s test) form the module's body unit, reached with any unit of the module. A unit hashes
its AST with docstrings removed, dumped without positions (``ast.dump(..., include_attributes=False)``),
so comments, formatting and line numbers do not count. Import statements are not hashed, they resolve
names (absolute, relative, ``import a.b as c``, inside functions too): a reference to a package unit
through an alias (``band.band_attention``, ``from repro.models import span`` then ``span.x``, an
``as`` name) is written as the unit's own name, so moving a module, renaming it or renaming an alias
leaves every hash unchanged; a reference outside the package is written as its full dotted name.

**Reachability.** The root: the entry a run starts from (:data:`TRAINED`, :data:`SCORED`), which reaches
settling, the data, the training step and the scoring by name; where a commit has no entry, every unit of
every *numbers* module outside ``repro/models/`` (everything but :data:`NOT_NUMBERS`). Then the units of
the spec's family module (``repro.models.<model.family>``, which ``repro.models.family`` imports by name)
and, for the family that picks its attention by name, of ``repro/models/attentions/<model.attention>.py``.
The closure follows references into ``repro/`` (models included), never into :data:`NOT_NUMBERS`; a
method called on an object is reached with its class, a class with all its methods; annotations name
types, not code that runs, and reach nothing. A table, a module-level dict whose keys are strings and whose values are
package functions or classes (a dispatch table: ``repro.models.span.SPAN_KINDS``) or a tuple of rows each
keyed by a ``name`` string (``repro.data.catalog._ROWS``), is hashed entry by entry, and an entry is
followed and hashed only when its key is a string value of the spec or a string constant of a reached
unit under ``repro/models/`` (to a fixpoint); the numbers code outside models/ hands the model its spec
and picks no entry by a string of its own, and its validation lists name every kind, so its strings
would reach every entry. So a dynamic-span class is not reached by a Sparse Transformer run.

**Conservative cases** (counted as could-differ, never the other way): a name the analysis cannot
resolve into the package takes every unit of the nearest module it names; a module used as a value
takes all its units; a file that does not parse counts whole; a local name that shadows a global may
add a unit; a method shared by all span kinds (the adaptive-span attention's ``_bucketed``, which calls
``repro.models.relative_attention.bucketed_attention``) is reached by every run of the ``adaptive_span``
family, whatever its ``span.kind``; a commit whose family module is missing takes every unit under
``repro/models/``. The one way it could miss code: a method of a class that the run never names (an
object handed in from outside the closure); the run's objects (its data, module, model, trainer
callbacks) are all built by name inside it. The digest is sha256 over :data:`FORMAT` and the sorted unit
hashes of the closure.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "computation-digest 2"  # changes whenever what a digest hashes changes
PACKAGE = "repro"
MODELS = "repro.models"
PRETRAINED = "repro.pretrained"  # a root only for a run that scores the authors' weights (train.weights)
BODY = "<body>"  # the name of a module's body unit
# Where a run starts, by the names it had over the history (the first found counts): a trained run
# (settling, data, the training step, the final scoring; repro/runner.py in the flat layout of the first
# days), and a run that scores the authors' weights. A commit with none roots the run at every numbers
# module instead (module docstring).
TRAINED = ("repro.train.runner.run_spec", "repro.runner.run_spec")
SCORED = ("repro.pretrained.imported.score",)

# What of the package cannot change a run's numbers (its trained weights, its scores): the code that
# reports, prints, tracks, benchmarks, re-executes or names runs. Listed by exclusion, with the names
# these files had over the history (the package was flat once), so that code moved between files still
# counts wherever it went. A path names a file or a folder.
NOT_NUMBERS = (
    "repro/report",  # reports and verdicts
    "repro/report.py",  # ... in the flat layout
    "repro/analysis",  # the report's per-paper analyses, before they became repro/report/
    "repro/cli",  # the command line
    "repro/cli.py",
    "repro/plan",  # which runs a command trains and their ETA (was repro/cli: the run ids say the rest)
    "repro/session",  # a plan's runs handed to the trainer or a launcher, one after another (was repro/cli)
    "repro/track",  # W&B, trackio
    "repro/tracking.py",
    "repro/dashboard.py",
    "repro/pull.py",
    "repro/sync.py",
    "repro/wandb_log.py",
    "repro/wandb_report.py",
    "repro/bench",  # benchmarks
    "repro/config/claims.py",  # the claim language, before it became repro/claims/
    "repro/claims",  # the claim language and its judge
    "repro/grammar",  # the claim language's grammar and operators (was repro/claims/language.py, operators.py)
    "repro/claims.py",
    "repro/config/claim_checks.py",
    "repro/config/renders.py",  # which renderers a manifest names (now repro/config/renderer_names.py)
    "repro/config/renderer_names.py",
    "repro/data/cli.py",  # `repro data` (now repro/cli/data.py)
    "repro/train/verify.py",  # re-execution of stored runs
    "repro/train/compare.py",
    "repro/train/retrain.py",
    "repro/train/launch.py",  # job submission
    "repro/launch.py",
    "repro/train/sampling.py",  # generation from a trained run
    "repro/sampling.py",
    "repro/train/trained.py",
    "repro/replay/verify.py",  # the same, since they left repro/train (repro/replay/samebits.py stays counted,
    "repro/replay/compare.py",  # as repro/train/samebits.py was)
    "repro/replay/retrain.py",  # `repro retrain` (was repro/replay/replace.py; `--retrain-checkpoint` was here)
    "repro/replay/replace.py",
    "repro/replay/checkpoint.py",  # `repro run --retrain-checkpoint` (was repro/replay/retrain.py)
    "repro/sample",
    "repro/files",  # atomic writes, locks, bounded reads: where finished numbers are written, not what they are
    "repro/store/runs.py",  # a run's folder: its files written, read back, listed and locked
    "repro/store/settle.py",  # whether a run starts, resumes, is skipped or adopts a twin: not what it computes
    "repro/store/usable.py",  # whether a finished run's stored numbers can be used (read, never computed)
    "repro/data/fetch.py",  # downloads, checked against pinned sizes and hashes: the bytes are the pin's
    "repro/store/index.py",  # a cache of what a scan read
    "repro/store/provenance.py",
    "repro/store/digest.py",
    "repro/store/digests.py",
    "repro/console.py",
    "repro/progress.py",
    "repro/train/throughput.py",  # the machine's peak, achieved FLOP/s (measured, see MEASURES)
)
# Units, by qualified name, that measure time, load and memory while a run trains, or print its progress:
# what they record (seconds per step, MFU, load, peak memory) differs between two runs of one computation
# anyway, and no bits depend on them (a cost claim reads their measurement with its own spread).
MEASURES = (
    "repro.train.callbacks.TrainingMeter",
    "repro.train.callbacks.ProgressLines",
    "repro.train.finish._throughput",
    "repro.training.TrainingMeter",  # ... in the flat layout
)


class NoHistory(Exception):
    """The code of a commit cannot be read (no git, no repository, not a commit of it)."""


def counts(path: str) -> bool:
    """Whether the package file at ``path`` (relative to the repository) is numbers code."""
    return path.startswith(f"{PACKAGE}/") and not any(path == p or path.startswith(f"{p}/") for p in NOT_NUMBERS)


def module_name(path: str) -> str:
    """``repro/models/span.py`` -> ``repro.models.span``; a package's ``__init__.py`` -> the package."""
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# --- reading the sources -------------------------------------------------------------------------------


def repository() -> Path:
    """The repository this package is in (its parent folder)."""
    return Path(__file__).resolve().parents[2]


def working_tree(repo: Path) -> dict[str, str]:
    """The package's ``.py`` files on disk under ``repo``: path -> text."""
    out = {}
    for path in sorted((repo / PACKAGE).rglob("*.py")):
        rel = path.relative_to(repo).as_posix()
        if "__pycache__" not in rel:
            out[rel] = path.read_text(encoding="utf-8", errors="replace")
    return out


def committed(repo: Path, commit: str) -> dict[str, str]:
    """The package's ``.py`` files at ``commit``: path -> text (raises :class:`NoHistory`)."""
    listing = _git(repo, ["ls-tree", "-r", "-z", f"{commit}^{{commit}}", "--", PACKAGE], commit)
    blobs = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        _, kind, sha = meta.split()
        name = path.decode("utf-8", "replace")
        if kind == b"blob" and name.endswith(".py"):
            blobs.append((name, sha.decode()))
    raw = _git(repo, ["cat-file", "--batch"], commit, stdin="".join(f"{sha}\n" for _, sha in blobs).encode())
    out, at = {}, 0
    for name, _ in blobs:
        end = raw.index(b"\n", at)
        size = int(raw[at:end].split()[2])
        out[name] = raw[end + 1 : end + 1 + size].decode("utf-8", "replace")
        at = end + 1 + size + 1
    return out


def _git(repo: Path, args: list[str], commit: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True)
    except OSError as e:
        raise NoHistory(f"no git to read commit {commit} ({e.strerror})") from None
    if done.returncode != 0:
        raise NoHistory(f"commit {commit} is not in the git history at {repo}")
    return done.stdout


# --- units ---------------------------------------------------------------------------------------------


@dataclass
class Unit:
    """One unit: its hash, the package names it refers to (dotted, unresolved), its string constants,
    and for a table, its entries (key -> the hash of the entry and the names its value refers to)."""

    module: str
    hash: str = ""
    refs: set[str] = field(default_factory=set)
    strings: set[str] = field(default_factory=set)
    entries: dict[str, tuple[str, set[str]]] | None = None


@dataclass
class Module:
    name: str
    path: str
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted target
    units: dict[str, list[ast.AST]] = field(default_factory=dict)  # unit name -> its statements
    whole: str | None = None  # the source, when it does not parse


def _package_of(module: Module) -> str:
    return module.name if module.path.endswith("__init__.py") else module.name.rpartition(".")[0]


def _imports(node: ast.AST, module: Module) -> Iterator[tuple[str, str]]:
    """(local name, dotted target) of an import statement."""
    if isinstance(node, ast.Import):
        for a in node.names:
            yield (a.asname, a.name) if a.asname else (a.name.split(".")[0], a.name.split(".")[0])
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = _package_of(module).split(".")
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        for a in node.names:
            if a.name != "*":
                yield a.asname or a.name, f"{base}.{a.name}"


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    else:
        return []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def parse(path: str, text: str) -> Module:
    """The units and import aliases of one module."""
    module = Module(module_name(path), path)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        module.whole = text
        return module

    def top(stmts: Iterable[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.Import | ast.ImportFrom):
                module.aliases.update(_imports(node, module))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                module.units.setdefault(node.name, []).append(node)
            elif _targets(node):
                for name in _targets(node):
                    module.units.setdefault(name, []).append(node)
            elif isinstance(node, ast.If | ast.Try):  # the test and handlers in the body, the branches' names
                rest = [getattr(node, "test", None), *[h.type for h in getattr(node, "handlers", [])]]
                module.units.setdefault(BODY, []).extend(ast.Expr(r) for r in rest if r is not None)
                for part in ("body", "orelse", "finalbody"):
                    top(getattr(node, part, []))
                for handler in getattr(node, "handlers", []):
                    top(handler.body)
            elif not _docstring(node):
                module.units.setdefault(BODY, []).append(node)

    body = tree.body[1:] if tree.body and _docstring(tree.body[0]) else tree.body
    top(body)
    return module


def _docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


class Program:
    """The package's modules at one version of the code, and the hash of each unit (computed once, when a
    closure first reaches it: a run reaches a fifth of the package's units)."""

    def __init__(self, files: dict[str, str]):
        self.modules = {m.name: m for m in (parse(p, t) for p, t in files.items() if p.endswith(".py"))}
        self._units: dict[str, Unit] = {}

    def unit(self, name: str) -> Unit | None:
        """The unit of qualified ``name`` (None: no such unit)."""
        if name not in self._units:
            owner, _, attr = name.rpartition(".")
            module = self.modules.get(owner)
            if module is not None and attr == BODY and module.whole is not None:
                self._units[name] = Unit(owner, _sha(module.whole))
            elif module is not None and attr in module.units:
                self._units[name] = _Normaliser(self, module).unit(module.units[attr])
            else:
                return None
        return self._units[name]

    def resolve(self, dotted: str, depth: int = 0) -> tuple[str, str] | None:
        """``("unit", qualified name)``, ``("module", name)`` or None (not the package's, or unknown)."""
        if dotted.split(".")[0] != PACKAGE or depth > 20:
            return None
        if dotted in self.modules:
            return ("module", dotted)
        owner, _, attr = dotted.rpartition(".")
        module = self.modules.get(owner)
        if module is None:
            return None
        if attr in module.units:
            return ("unit", dotted)
        if attr in module.aliases:  # a name the module imported (a re-export)
            return self.resolve(module.aliases[attr], depth + 1)
        return None

    def nearest(self, dotted: str) -> str | None:
        """The longest module prefix of ``dotted`` (where an unresolved package name points)."""
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in self.modules:
                return ".".join(parts[:n])
        return None

    def module_units(self, name: str) -> list[str]:
        module = self.modules.get(name)
        if module is None:
            return []
        names = [f"{name}.{u}" for u in module.units]
        return names + ([f"{name}.{BODY}"] if module.whole is not None else [])


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class _Normaliser(ast.NodeTransformer):
    """A unit's statements with docstrings and imports removed and package references written as the
    referenced unit's name (module docstring); collects the references and string constants."""

    def __init__(self, program: Program, module: Module):
        self.program, self.module = program, module
        self.aliases = dict(module.aliases)
        self.scopes: list[set[str]] = []
        self.refs: set[str] = set()
        self.strings: set[str] = set()

    def unit(self, nodes: list[ast.AST]) -> Unit:
        for node in nodes:  # imports inside the unit (functions that import when called) resolve too
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    self.aliases.update(_imports(inner, self.module))
        out = Unit(self.module.name)
        items = self._table(nodes[0]) if len(nodes) == 1 else None
        if items is not None:  # hashed entry by entry: an entry counts only where a run reaches it
            out.entries = {}
            for key, value in items:
                refs, _, dump = self._collect(value)
                out.entries[key] = (_sha(f"{key}\n{dump}"), refs)
            out.hash = _sha(f"table {' '.join(_targets(nodes[0]))}")
            return out
        dumps = []
        for node in nodes:  # rewritten in place, once: a statement that binds several names is copied
            shared = len(_targets(node)) > 1
            dumps.append(ast.dump(self.visit(_copy(node) if shared else node), include_attributes=False))
        out.refs, out.strings = self.refs, self.strings
        out.hash = _sha("\n".join(dumps))
        return out

    def _collect(self, node: ast.AST) -> tuple[set[str], set[str], str]:
        """The references, strings and normalised dump of one expression of this unit."""
        inner = _Normaliser(self.program, self.module)
        inner.aliases = self.aliases
        dump = ast.dump(inner.visit(_copy(node)), include_attributes=False)
        return inner.refs, inner.strings, dump

    def _table(self, node: ast.AST) -> list[tuple[str, ast.AST]] | None:
        """A table's (key, entry) pairs, or None: not a table. Two shapes are tables: a dispatch dict
        ``NAME = {"key": package function or class, ...}`` (``SPAN_KINDS``), and a tuple or list of rows
        each keyed by a ``name`` string, ``dict(name="key", ...)`` or ``{"name": "key", ...}`` (the data
        catalog's ``_ROWS``)."""
        value = getattr(node, "value", None)
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            return None
        if isinstance(value, ast.Dict) and value.keys:
            pairs = []
            for key, item in zip(value.keys, value.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    return None
                if not isinstance(item, ast.Name | ast.Attribute) or self._target(item) is None:
                    return None
                pairs.append((key.value, item))
            return pairs
        if isinstance(value, ast.Tuple | ast.List) and value.elts:
            rows = [(_row_name(e), e) for e in value.elts]
            return rows if all(k is not None for k, _ in rows) and len({k for k, _ in rows}) == len(rows) else None
        return None

    def _target(self, node: ast.AST) -> tuple[str, list[str]] | None:
        """The dotted name a Name/Attribute chain refers to through this module's namespace, and how many
        of the chain's attributes it takes; None when the chain starts at a local or a builtin."""
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or any(node.id in s for s in self.scopes):
            return None
        chain.reverse()
        if node.id in self.aliases:
            base = self.aliases[node.id]
        elif node.id in self.module.units:
            base = f"{self.module.name}.{node.id}"
        else:
            return None
        return base, chain

    def _refer(self, node: ast.AST) -> ast.AST | None:
        """A package reference written as its unit's name (None: not one)."""
        found = self._target(node)
        if found is None:
            return None
        base, chain = found
        resolved = self.program.resolve(base)
        if resolved is None:
            if base.split(".")[0] == PACKAGE:  # a package name the analysis cannot resolve: conservative
                self.refs.add(self.program.nearest(base) or PACKAGE)
                return None
            return _rebuild(ast.Name(id=".".join([base, *chain]), ctx=ast.Load()), [])
        taken = 0
        while resolved[0] == "module" and taken < len(chain):
            step = self.program.resolve(f"{resolved[1]}.{chain[taken]}")
            if step is None:
                self.refs.add(resolved[1])  # an attribute of a module the analysis does not know: all of it
                return _rebuild(ast.Name(id="<module>", ctx=ast.Load()), chain[taken:])
            resolved, taken = step, taken + 1
        self.refs.add(resolved[1])
        if resolved[0] == "module":
            return ast.Name(id="<module>", ctx=ast.Load())
        return _rebuild(ast.Name(id=resolved[1].rpartition(".")[2], ctx=ast.Load()), chain[taken:])

    # scopes: a function's arguments and the names it binds are its own (never a package reference)
    def _scoped(self, node: ast.AST, names: set[str]) -> ast.AST:
        self.scopes.append(names)
        try:
            return self.generic_visit(node)
        finally:
            self.scopes.pop()

    def visit_FunctionDef(self, node):
        _strip_docstring(node)
        _strip_annotations(node)
        return self._scoped(node, _bound(node))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node):  # a type names no code that runs: a bare annotation is dropped
        node.annotation = ast.Constant(None)
        return self.generic_visit(node)

    def visit_Lambda(self, node):
        return self._scoped(node, _bound(node))

    def visit_ClassDef(self, node):
        _strip_docstring(node)
        return self.generic_visit(node)

    def _comprehension(self, node):
        names = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        return self._scoped(node, names)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Import(self, node):
        return None

    visit_ImportFrom = visit_Import

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            self.strings.add(node.value)
        return node

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            out = self._refer(node)
            if out is not None:
                return out
        return node

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Load):
            out = self._refer(node)
            if out is not None:
                return out
        return self.generic_visit(node)


def _row_name(node: ast.AST) -> str | None:
    """The ``name`` of a catalog row, ``dict(name="x", ...)`` or ``{"name": "x", ...}`` (None: not a row)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        found = [k.value for k in node.keywords if k.arg == "name"]
    elif isinstance(node, ast.Dict):
        found = [
            v for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant) and k.value == "name"
        ]
    else:
        return None
    return found[0].value if found and isinstance(found[0], ast.Constant) and isinstance(found[0].value, str) else None


def _copy(node: ast.AST) -> ast.AST:
    return copy.deepcopy(node)  # the transformer rewrites in place; the module's tree stays as parsed


def _rebuild(base: ast.expr, attrs: list[str]) -> ast.expr:
    for attr in attrs:
        base = ast.Attribute(value=base, attr=attr, ctx=ast.Load())
    return base


def _strip_annotations(node) -> None:
    """A function's argument and return annotations removed: types are not executed (postponed, as every
    module of the package imports ``annotations`` from ``__future__``), so they reach no unit."""
    args = node.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None
    node.returns = None


def _strip_docstring(node) -> None:
    if node.body and _docstring(node.body[0]):
        node.body = node.body[1:] or [ast.Pass()]


def _bound(node) -> set[str]:
    """The names a function or lambda binds: its arguments and what it assigns (not nested scopes', nor
    the names its imports bind, which resolve like the module's)."""
    args = node.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    if isinstance(node, ast.Lambda):
        return names
    declared: set[str] = set()
    stack = list(node.body)
    while stack:
        inner = stack.pop()
        if isinstance(inner, ast.Global | ast.Nonlocal):
            declared.update(inner.names)
        elif isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(inner.name)
            continue
        elif isinstance(inner, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            continue
        elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store | ast.Del):
            names.add(inner.id)
        elif isinstance(inner, ast.ExceptHandler) and inner.name:
            names.add(inner.name)
        stack.extend(ast.iter_child_nodes(inner))
    return names - declared


# --- the closure ---------------------------------------------------------------------------------------


def _excluded(program: Program, module: str) -> bool:
    return not counts(program.modules[module].path)


def _spec_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _spec_strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _spec_strings(v)


def roots(program: Program, spec: dict[str, Any]) -> tuple[list[str], bool]:
    """The root units for ``spec`` and whether the family module was found (False: every models unit).

    The entry a run starts from (:data:`TRAINED`, or :data:`SCORED` for the authors' weights), or where a
    commit has no such entry, every unit of every numbers module outside ``repro/models/``; then the
    spec's family module and, for the family that picks its attention by name, that attention's file."""
    weights = (spec.get("train") or {}).get("weights")  # the authors' weights, scored (repro.pretrained)
    entry = next((e for e in (SCORED if weights else TRAINED) if program.unit(e) is not None), None)
    if entry is not None:
        out = [entry]
    else:
        out = []
        for name, module in program.modules.items():
            skipped = (MODELS, *([] if weights else [PRETRAINED]))
            if counts(module.path) and not any(name == p or name.startswith(f"{p}.") for p in skipped):
                out += program.module_units(name)
    model = spec.get("model") or {}
    family = f"{MODELS}.{model.get('family')}"
    if family not in program.modules:
        return out + [u for n in program.modules if n.startswith(f"{MODELS}.") for u in program.module_units(n)], False
    out += program.module_units(family)
    attention = model.get("attention")
    if isinstance(attention, str):
        chosen = f"{MODELS}.attentions.{attention}"
        if chosen in program.modules:
            out += program.module_units(chosen)
        else:  # the family names an attention this code does not have as a file: all of them
            out += [u for n in program.modules if n.startswith(f"{MODELS}.attentions") for u in program.module_units(n)]
    return out, True


def closure(program: Program, spec: dict[str, Any]) -> set[str]:
    """The units a run of ``spec`` executes (module docstring); a table's entry as ``table[key]``."""
    start, _ = roots(program, spec)
    keys = set(_spec_strings(spec))
    reached: set[str] = set()
    tables: set[str] = set()
    todo = list(start)
    while True:
        while todo:
            name = todo.pop()
            if name in reached:
                continue
            unit = program.unit(name)
            if unit is None:
                if name in program.modules and not _excluded(program, name):  # a module used whole
                    todo += program.module_units(name)
                continue
            if _excluded(program, unit.module) or name in MEASURES:
                continue
            reached.add(name)
            body = f"{unit.module}.{BODY}"
            if program.unit(body) is not None:
                todo.append(body)
            if unit.module == MODELS or unit.module.startswith(f"{MODELS}."):
                keys |= unit.strings
            if unit.entries is not None:
                tables.add(name)
            for ref in unit.refs:
                if ref in program.modules:
                    if not _excluded(program, ref):
                        todo += program.module_units(ref)
                else:
                    todo.append(ref)
        for table in tables:
            for key, (_, refs) in program.unit(table).entries.items():
                if key in keys and f"{table}[{key}]" not in reached:
                    reached.add(f"{table}[{key}]")
                    todo += [r for r in refs if r not in reached]
        if not todo:
            return reached


def _hash(program: Program, name: str) -> str:
    if name.endswith("]"):  # a table's entry
        table, _, key = name[:-1].partition("[")
        return program.unit(table).entries[key][0]
    return program.unit(name).hash


@functools.lru_cache(maxsize=64)
def _program(repo: str, commit: str | None) -> Program:
    files = working_tree(Path(repo)) if commit is None else committed(Path(repo), commit)
    return Program(files)


def digest(spec: dict[str, Any], commit: str | None = None, repo: Path | None = None) -> str:
    """The computation digest of a run of ``spec`` (a stored spec.yaml's content or a resolved spec) at
    ``commit`` (None: the code on disk) of ``repo`` (default: this package's repository)."""
    return of(_program(str(repo or repository()), commit), spec)


def of(program: Program, spec: dict[str, Any]) -> str:
    """The computation digest of a run of ``spec`` by the code of ``program``."""
    units = sorted(_hash(program, u) for u in closure(program, spec))
    return hashlib.sha256("\n".join([FORMAT, *units]).encode()).hexdigest()[:12]
