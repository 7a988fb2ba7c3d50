"""``repro verify``: a stored run re-executed as it was made, and its numbers compared bit for bit.

As it was made means: the code of its ``code_version`` (a git worktree of that commit in a scratch
folder: its package, manifests and renderers, whatever the checkout here holds), the environment its
summary records where that decides bits (the thread count, the CPU instruction set; the precision is in
the spec), a scratch results root (the store is never written) and W&B off. The run is trained by that
code's own ``repro run NAME --run-id ID`` in a child process, which is the one interface every commit of
the suite has kept (code older than ``--run-id`` selects the run's grid cell with ``--only``), as
``repro retrain``'s child is (:mod:`repro.replay.children`): SIGTERM, SIGINT and SIGHUP are passed on to
it, and the command stops in one line once it has (exit 143, 130, 129), its scratch folder removed; the
child dies with its parent. A scratch folder that a killed process left (its ``owner.lock`` held by
nobody) is removed, with its worktrees, by the next process that makes a worktree of the repository.

The instruction set comes from the summary's ``environment.cpu_isa``: ``avx2`` re-executes on the AVX2
kernels, ``none`` on the libraries' own choice (which must be the recorded ``cpu_capability``). A run
stored before the instruction set was recorded is tried on the AVX2 kernels and, where they differ, on
this CPU's native ones too (docs/reproducibility.md: the stored runs came from AVX2 and AVX-512 EPYCs).
The comparison is :mod:`repro.replay.compare`: bit for bit, or within a relative ``tolerance``. A line that
is not the same bits names the largest difference beside the first, and which recorded property of the
environment differs from this machine (the CPU vendor above all: MKL picks its GEMM kernels per vendor,
and the AVX2 pin does not hold that, so an Intel CPU leaves an AMD one's bits in the last place).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from repro import cpu_isa
from repro.bounds import ALLOW_READ, TRUST_CODE
from repro.config.access import NONE, Access
from repro.files import locks
from repro.replay import children
from repro.replay.compare import Comparison, compare
from repro.store.runs import RunDir, sources

# the libraries' instruction-set variables (repro/cpu_isa.py pins them to AVX2)
ISA_VARIABLES = tuple(cpu_isa.AVX2)
DEFAULT_THREADS = 2  # train.threads' default: what a summary without an environment was trained with


@dataclass(frozen=True)
class Verdict:
    """A run's line: ``same`` (True: the same bits; False: differs; None: cannot verify) and its text."""

    run_id: str
    manifest: str
    same: bool | None
    text: str

    def __str__(self) -> str:
        return f"{self.run_id}  {self.manifest}  {self.text}"


class CannotVerify(Exception):
    """Why a run cannot be re-executed as it was made (the line says it after ``cannot verify:``)."""


def verify(
    run: RunDir,
    scratch: Path,
    echo: Callable[[str], None] = lambda line: None,
    access: Access = NONE,
    tolerance: float | None = None,
) -> Verdict:
    """Re-execute the stored ``run`` under ``scratch`` and compare; never writes the store. ``access``: the
    folders the user allowed its manifest beyond its own (its corpus may lie elsewhere). ``tolerance``: a
    relative difference every number may have for the run to pass (:meth:`Gap.relative`; None: bit for
    bit); the line names the largest difference either way, and what of the environment differs."""
    manifest = run.path.parent.name
    try:
        spec, summary = run.spec(), run.summary()
        if summary.get("status") != "finished":
            raise CannotVerify(f"the run is not finished (status {summary.get('status', 'none')})")
        repo, commit = _commit(run, spec.get("code_version"))
        threads, isas = _environment(spec, summary)
        code = worktree(repo, commit, scratch / "code" / commit)
        tried, within, note = [], None, ""
        for isa in isas:
            echo(f"verifying {run.run_id} ({manifest}) at {commit}, {threads} threads, {isa} kernels")
            out = scratch / "results" / f"{run.run_id}-{isa}"
            here = _execute(run, spec, code, out, threads, isa, access, echo)
            compared, kernels = compare(run, here), _kernels(isa, summary)
            if compared.first is None:
                return Verdict(run.run_id, manifest, True, f"same bits ({kernels})")
            note = environment_note(summary.get("environment"), this_machine(here, threads), isa)
            if tolerance is not None and within is None and compared.within(tolerance):
                within = f"same within {tolerance:g}: largest difference {compared.largest} ({kernels}); {note}"
            tried.append(f"{compared.first} ({kernels}){_beside(compared, tolerance)}")
        if within is not None:
            return Verdict(run.run_id, manifest, True, within)
        return Verdict(run.run_id, manifest, False, "; ".join([*tried, note]))
    except CannotVerify as why:
        return Verdict(run.run_id, manifest, None, f"cannot verify: {why}")


def _beside(compared: Comparison, tolerance: float | None) -> str:
    """What a differing line says beside the first difference: the largest between numbers (and that it
    is beyond the tolerance), and, under a tolerance, a difference no tolerance passes."""
    said, largest, first = "", compared.largest, compared.first
    if largest is not None:
        if first is not None and (largest.step, largest.what) == (first.step, first.what):
            said = f"; the largest difference too, |diff| {largest.absolute:.3g} (relative {largest.relative:.3g})"
        else:
            said = f"; largest difference {largest}"
        if tolerance is not None and largest.relative > tolerance:
            said += f", beyond the tolerance {tolerance:g}"
    if tolerance is not None and compared.unnumbered is not None:
        said += f"; not between two numbers, so beyond any tolerance: {compared.unnumbered}"
    return said


# the recorded properties of an environment that decide a run's bits, in the order a verdict names them
PROPERTIES = ("cpu_vendor", "device", "cpu_capability", "threads", "torch", "lightning", "blas", "precision")


def recorded_vendor(environment: Mapping | None) -> tuple[str | None, bool]:
    """The CPU vendor a stored run trained on (None: unknown), and whether it was inferred: a run stored
    before the vendor was recorded names it by its ``device``, the CPU's model name (:func:`cpu_isa.vendor_of`)."""
    environment = environment or {}
    if environment.get("cpu_vendor"):
        return environment["cpu_vendor"], False
    return cpu_isa.vendor_of(environment.get("device")), True


def this_machine(here: RunDir, threads: int) -> dict:
    """The environment of the re-executed run ``here``, as its code recorded it, completed with this
    machine's own where that code records less (code older than the vendor's record)."""
    recorded = dict(here.summary().get("environment") or {})
    recorded.setdefault("cpu_vendor", cpu_isa.vendor())
    recorded.setdefault("device", cpu_isa.model())
    recorded.setdefault("threads", threads)
    recorded.setdefault("torch", torch_version())
    return recorded


def environment_note(stored: Mapping | None, here: Mapping, isa: str) -> str:
    """Which recorded property of the stored run's environment differs from this machine's (``here``:
    :func:`this_machine`), and what that does to the bits; or that none does."""
    if not stored:
        return "the run records no environment to compare with this machine's"
    vendor, inferred = recorded_vendor(stored)
    compared, said = [], []
    if vendor and here.get("cpu_vendor"):
        compared.append("cpu_vendor")
        if vendor != here["cpu_vendor"]:
            how = "; the vendor inferred from that model name" if inferred else ""
            held = "which the AVX2 pin does not hold" if isa == "avx2" else "whatever the instruction set"
            said.append(
                f"recorded on {vendor} ({stored.get('device', 'unknown')}{how}), this CPU is {here['cpu_vendor']} "
                f"({here.get('device', 'unknown')}): MKL picks its GEMM kernels per CPU vendor, {held}"
            )
    for key in PROPERTIES[1:]:
        if key not in stored or key not in here:
            continue
        compared.append(key)
        named = key == "device" and said  # the vendor's clause names both models
        if stored[key] != here[key] and not named:
            said.append(f"recorded {key} {_quoted(stored[key])}, here {_quoted(here[key])}")
    if not said:
        return f"no recorded property of the environment differs ({', '.join(compared)})"
    return "; ".join(said) + " (docs/reproducibility.md)"


def _quoted(value) -> str:
    return f'"{value}"' if isinstance(value, str) and " " in value else str(value)


def _commit(run: RunDir, version: str | None) -> tuple[Path, str]:
    """The repository that holds the run's commit, and the commit: the run's results root's repository,
    else the one this code is in."""
    if not version or version == "unknown":
        raise CannotVerify("its spec.yaml records no code_version")
    if version.endswith("+dirty"):
        raise CannotVerify(f"it was trained with uncommitted changes (code_version {version})")
    store = run.path.parent.parent.parent
    for place in (store, Path(__file__).resolve().parent):
        repo = git(place, "rev-parse", "--show-toplevel")
        if repo and git(Path(repo), "rev-parse", "--verify", "--quiet", f"{version}^{{commit}}"):
            return Path(repo), git(Path(repo), "rev-parse", "--short", f"{version}^{{commit}}")
    raise CannotVerify(f"commit {version} is in no repository here (the results root's, or this code's)")


def _environment(spec: dict, summary: dict) -> tuple[int, list[str]]:
    """The thread count, and the instruction sets to try (``avx2``, ``native``), from the summary."""
    environment = summary.get("environment") or {}
    torch = torch_version()
    if environment.get("torch") and environment["torch"] != torch:
        raise CannotVerify(f"it was trained with torch {environment['torch']}; this is torch {torch}")
    threads = environment.get("threads") or (spec.get("train") or {}).get("threads") or DEFAULT_THREADS
    auto = (spec.get("train") or {}).get("precision") == "auto"
    # auto resolved to bf16-mixed only on bf16 units (AVX-512 BF16, AMX): re-executed on a CPU without them
    # it would run bf16 through another kernel (converted to float32, or refused), so not the same bits
    if auto and environment.get("precision") == "bf16-mixed" and not cpu_isa.bf16_fast():
        raise CannotVerify(
            f"it trained in bf16-mixed (train.precision: auto); this CPU has no fast bf16 ({cpu_isa.features()})"
        )
    recorded = environment.get("cpu_isa")
    if recorded == "avx2":
        return threads, ["avx2"]
    if recorded == "none":
        native, wanted = native_capability(), environment.get("cpu_capability")
        if wanted and native != wanted:
            raise CannotVerify(f"it ran on the libraries' own {wanted} kernels; this CPU's are {native}")
        return threads, ["native"]
    if recorded is not None:
        raise CannotVerify(f"its environment records an unknown instruction set {recorded!r}")
    # not recorded: stored before the pin; AVX2 kernels first, then this CPU's own where they differ
    return threads, ["avx2"] + (["native"] if native_capability() not in ("AVX2", "DEFAULT") else [])


def _kernels(isa: str, summary: dict) -> str:
    """How the run was re-executed, and what its summary did not record (so was assumed)."""
    said = "AVX2 kernels" if isa == "avx2" else f"this CPU's native {native_capability()} kernels"
    environment = summary.get("environment")
    if not environment:
        return f"{said}; the run records no environment: {DEFAULT_THREADS} threads assumed"
    return said if environment.get("cpu_isa") else f"{said}; the run records no instruction set"


def worktree(repo: Path, commit: str, where: Path) -> Path:
    """A detached worktree of ``commit`` (made once per commit and scratch folder), after the scratch
    folders that killed processes left in ``repo``'s worktrees are removed."""
    if not where.exists():
        _remove_abandoned(repo)
        where.parent.mkdir(parents=True, exist_ok=True)
        made = subprocess.run(
            ["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(where), commit],
            capture_output=True,
            text=True,
        )
        if made.returncode != 0:
            raise CannotVerify(f"git worktree add of {commit} failed: {last_line(made.stderr)}")
    return where


SCRATCH_PREFIX = "repro-verify-"
OWNER = "owner.lock"  # held while a process uses its scratch folder: nobody holds one that a killed process left


@contextlib.contextmanager
def scratch_folder(keep: bool = False) -> Iterator[Path]:
    """A scratch folder for the code (``code/<commit>``) and the re-executed runs, its ``owner.lock`` held
    while in use; removed after, with the worktrees it holds (their repositories forget them), unless
    ``keep`` (then its lock file goes: a folder kept on purpose is not one a killed process left)."""
    folder = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    try:
        with locks.FileLock(folder / OWNER, remove=keep):  # taken before any worktree is in the folder
            yield folder
    finally:
        if not keep:
            _remove(folder)


def _remove(folder: Path) -> None:
    """Remove a scratch folder and have the repositories of its worktrees forget them."""
    repos = {
        git(tree, "rev-parse", "--path-format=absolute", "--git-common-dir") for tree in (folder / "code").glob("*")
    }
    shutil.rmtree(folder, ignore_errors=True)
    for common in filter(None, repos):
        subprocess.run(["git", "--git-dir", common, "worktree", "prune"], capture_output=True)


def _remove_abandoned(repo: Path) -> None:
    """Remove the scratch folders holding worktrees of ``repo`` whose owner is dead (a ``kill -9``: its
    ``owner.lock`` is there and nobody holds it), and have ``repo`` forget the worktrees whose folder is gone."""
    for line in git(repo, "worktree", "list", "--porcelain").splitlines():
        tree = Path(line.removeprefix("worktree ")) if line.startswith("worktree ") else None
        if tree is None or tree.parent.name != "code" or not tree.parent.parent.name.startswith(SCRATCH_PREFIX):
            continue
        owner = tree.parent.parent / OWNER
        if owner.is_file() and locks.holder(owner) is None:
            _remove(tree.parent.parent)
    subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)


def _execute(
    run: RunDir,
    spec: dict,
    code: Path,
    results: Path,
    threads: int,
    isa: str,
    access: Access,
    echo: Callable[[str], None] = lambda line: None,
) -> RunDir:
    """Train the run with the code in ``code`` into ``results``; the re-executed run's folder. The child's
    output goes to ``verify.log``, and its progress lines (as ``repro run`` prints them) to ``echo`` too."""
    manifest = run.path.parent.name
    source = sources(run.path.parent.parent.parent).get(manifest)
    ref, overrides = (_in_tree(Path(source["path"]), code), source.get("args", [])) if source else (manifest, [])
    parser = parser_text(code)
    if '"--run-id"' in parser:
        seeds = ["--seeds", str(int((spec.get("train") or {}).get("seed", 0)) + 1)] if '"--seeds"' in parser else []
        selection = ["--run-id", run.run_id, *seeds]
    else:
        cell = spec.get("cell") or {}
        if any(isinstance(v, (dict, list)) for v in cell.values()):
            raise CannotVerify("its code has no --run-id, and its grid cell cannot be named by --only")
        selection = [a for k, v in cell.items() for a in ("--only", f"{k}={v}")]
    command = [sys.executable, "-m", "repro", "--results", str(results), "run", ref, *overrides]
    command += ["--scale", str(spec.get("scale", "tiny")), "--no-wandb", *selection]
    results.mkdir(parents=True, exist_ok=True)
    env = child_environment(code, threads, isa, access)
    stopped = f"the re-execution of run {run.run_id} stopped; the store is unchanged"  # a signal: passed on
    with (results / "verify.log").open("w", encoding="utf-8") as log:
        status = children.run(command, code, env, log, stopped, follow=_progress(echo))
    here = RunDir(results, manifest, run.run_id)
    if status != 0 or not (here.path / "summary.json").exists():
        said = last_line((results / "verify.log").read_text(encoding="utf-8", errors="replace"))
        raise CannotVerify(f"its code's `repro run` exited {status} without the run ({said})")
    return here


# a training run's progress lines, as every commit's `repro run` indents them under its run's line
PROGRESS = re.compile(r"^\s+(step \d|evaluating )")


def _progress(echo: Callable[[str], None]) -> Callable[[str], None]:
    """What follows the child's output: each progress line said through ``echo`` (a verify of minutes is
    not silent)."""

    def follow(line: str) -> None:
        if PROGRESS.match(line):
            echo(line.rstrip("\n"))

    return follow


def child_environment(code: Path, threads: int, isa: str, access: Access = NONE) -> dict[str, str]:
    """The re-executing process's environment: this one's, with the code of ``code`` first on the path,
    the thread count, the instruction set (``avx2``: the libraries held to AVX2 by their own variables,
    which code older than the pin obeys too; ``native``: those variables unset), the folders of ``access``
    in the variables every commit's code reads, W&B off, and nothing that would point it at this
    checkout's manifests or results."""
    env = {k: v for k, v in os.environ.items() if k not in ("REPRO_EXPERIMENTS", "REPRO_RESULTS", *ISA_VARIABLES)}
    env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = str(threads)
    env["WANDB_MODE"] = "disabled"
    env["REPRO_CPU_ISA"] = isa
    env[ALLOW_READ] = os.pathsep.join(map(str, access.read))
    env[TRUST_CODE] = os.pathsep.join(map(str, access.code))
    if isa == "avx2":
        env.update(cpu_isa.AVX2)
    return env


_NATIVE: list[str] = []


def native_capability() -> str:
    """The kernels torch picks on this CPU when nothing holds it (asked once of a fresh process)."""
    if not _NATIVE:
        env = {k: v for k, v in os.environ.items() if k not in ISA_VARIABLES}
        asked = subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
            capture_output=True,
            text=True,
            env=env,
        )
        _NATIVE.append(asked.stdout.strip() or "unknown")
    return _NATIVE[0]


def torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _in_tree(path: Path, code: Path) -> str:
    """A manifest file of this checkout as the same file of the worktree (an outside file as it is)."""
    top = git(path.parent, "rev-parse", "--show-toplevel") if path.parent.is_dir() else ""
    if top:
        with contextlib.suppress(ValueError):
            return str(code / path.resolve().relative_to(Path(top).resolve()))
    return str(path)


def parser_text(code: Path) -> str:
    """The source that declares the worktree's ``repro run`` options (they tell how to select one run):
    the central parser of older code (``repro/cli.py``, then ``repro/cli/parser.py``), and the run command's
    own module since each command declares its arguments (``repro/cli/run.py``, with ``cli/options.py``)."""
    names = ("repro/cli.py", "repro/cli/parser.py", "repro/cli/run.py", "repro/cli/options.py")
    return "\n".join(
        (code / name).read_text(encoding="utf-8", errors="replace") for name in names if (code / name).exists()
    )


def git(place: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(place), *args], capture_output=True, text=True)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"
