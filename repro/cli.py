"""The ``repro`` command. Thin: parse, call the modules, print.

Exit status: 0 done; 1 a run failed, or a write failed (StoreError, one line); 2 bad input (UserError,
one line); 3 a run was skipped because another process trains it; 128 + N stopped by signal N
(``repro run``: 143 SIGTERM, 130 SIGINT, after checkpointing at a step boundary).

Commands that train, sample or talk to W&B import torch, Lightning and wandb where they start: every
``repro`` invocation (``--help``, ``list``, tab completion) would otherwise wait seconds for them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from pathlib import Path

import shtab

from repro import analysis, atomic, data, launch, lookup, overrides, progress, report, signals, store, throughput
from repro import manifest as manifests
from repro.console import print_table
from repro.data import cli as data_cli
from repro.errors import StoreError, UserError
from repro.manifest import DEFAULT_SCALE
from repro.progress import say
from repro.store import CorruptFile, RunDir, results_root, scan

BENCHES = {"adaptive": "repro.bench.adaptive", "attention": "repro.bench.attention", "st-step": "repro.bench.st_step"}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # overrides after the options (`run NAME --scale tiny key=value`) land here
        if not hasattr(args, "overrides") or not all(overrides.is_override(a) for a in extra):
            parser.error(f"unrecognized arguments: {' '.join(a for a in extra if not overrides.is_override(a))}")
        args.overrides += extra
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except StoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except signals.Interrupted as err:
        print(f"interrupted by {err.name}: {err.detail or 'no run was training'}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print(
            "interrupted: finished runs are stored; an unfinished run resumes from its last checkpoint", file=sys.stderr
        )
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="repro", description=__doc__)
    parser.add_argument("--results", default=None, help=RESULTS_HELP)
    shtab.add_argument_to(
        parser,
        ["--print-completion"],
        help='print a shell completion script (bash, zsh, tcsh): e.g. `eval "$(repro --print-completion bash)"`',
        preamble=COMPLETION,
    )
    # every subcommand takes --results too (after it: `repro run smoke --results DIR`)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--results", default=argparse.SUPPRESS, help=RESULTS_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, func, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, parents=[common])
        p.set_defaults(func=func)
        return p

    def manifest_args(p: argparse.ArgumentParser, scale: bool = True, optional: str | None = None) -> None:
        """The manifest and its overrides; ``optional``: the name may be left out (the help says what is
        then meant), and the overrides name stored runs (those made with them)."""
        name = p.add_argument(
            "name",
            nargs="?" if optional else None,
            help=optional or "a manifest: its name, a group (every name ending with it: `table1`), or a path",
        )
        name.complete = {"bash": "_repro_manifests", "zsh": "_repro_manifests"}
        p.add_argument(
            "overrides",
            nargs="*",
            metavar="KEY=VALUE",
            help="the overrides the runs were made with"
            if optional
            else "set a dotted key in every run (model.span.ramp=64); with -m, KEY=V1,V2 sweeps it",
        )
        p.add_argument(
            "-m",
            "--multirun",
            action="store_true",
            help="the overrides include sweeps (KEY=V1,V2)"
            if optional
            else "make every KEY=V1,V2 override a grid axis (added, or replacing the manifest's)",
        )
        if scale:
            p.add_argument("--scale", default=DEFAULT_SCALE, help=SCALE_HELP)

    p = command("list", cmd_list, "every manifest: title, runs at a scale, finished")
    p.add_argument("--scale", default=DEFAULT_SCALE, help=SCALE_HELP)
    p.add_argument("--json", action="store_true", help="print JSON (one object per manifest)")
    p.add_argument("--names", action="store_true", help="print only the names (for shell completion)")

    p = command("show", cmd_show, "the resolved runs of a manifest (or a group) as a table")
    manifest_args(p)
    p.add_argument("--json", action="store_true", help="print JSON, each run with its resolved spec")
    p.add_argument("--save", metavar="PATH", default=None, help=SAVE_HELP)

    p = command("validate", cmd_validate, "check manifests (all shipped ones when no path is given)")
    p.add_argument("paths", nargs="*", metavar="PATH", help="manifest files (default: every discovered manifest)")

    p = command("run", cmd_run, "train every run of a manifest or group (finished runs are skipped)")
    manifest_args(p)
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the runs whose grid cell has this value (repeatable; KEY may be a dotted suffix)",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=None,
        metavar="N",
        help="cap every run at N steps (a different run id: kept out of reports)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="list the runs, their state and missing datasets; train nothing"
    )
    p.add_argument("--devices", type=int, default=1, metavar="G", help="processes (accelerators) per node (default 1)")
    p.add_argument(
        "--num-nodes",
        "--nodes",
        dest="num_nodes",
        type=int,
        default=1,
        metavar="N",
        help="nodes per run (default 1): started by torchrun or srun, or allocated by --launcher slurm",
    )
    p.add_argument("--no-wandb", action="store_true", help="do not log to Weights & Biases")
    p.add_argument("--save", metavar="PATH", default=None, help=SAVE_HELP)
    p.add_argument("--run-id", default=None, metavar="ID", help="only the run with this id (what a job runs)")
    cluster = p.add_argument_group("launchers (submitit; `pip install -e '.[cluster]'`)")
    cluster.add_argument(
        "--launcher",
        choices=launch.LAUNCHERS,
        default=None,
        help="local: run the runs as --max-parallel local processes and wait; slurm: submit them "
        "as one job array and return with the job ids (default: one after another, here)",
    )
    cluster.add_argument(
        "--max-parallel",
        type=int,
        default=None,
        metavar="K",
        help="local: processes at a time (default 1); slurm: array tasks at a time",
    )
    cluster.add_argument("--partition", default=None, help="SLURM partition")
    cluster.add_argument("--gpus-per-node", type=int, default=None, metavar="G", help="SLURM GPUs per node")
    cluster.add_argument("--cpus-per-task", type=int, default=None, metavar="C", help="SLURM CPUs per task")
    cluster.add_argument("--time", type=int, default=None, metavar="MIN", help="SLURM time limit in minutes")
    cluster.add_argument("--mem", default=None, metavar="M", help="SLURM memory per node (e.g. 32G)")
    cluster.add_argument(
        "--slurm-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other sbatch option, without its dashes (repeatable: --slurm-arg qos=high)",
    )

    p = command("status", cmd_status, "stored runs and their state")
    manifest_args(p, scale=False, optional="a manifest or group (default: every stored run)")
    p.add_argument("--json", action="store_true", help="print JSON (one object per run)")

    p = command("report", cmd_report, "regenerate a manifest's tables/figures and judge its claims")
    manifest_args(p, scale=False, optional="a manifest or group (or --all)")
    p.add_argument("--all", action="store_true", help="every manifest, and results/REPORT.md over them")
    p.add_argument("--wandb", action="store_true", help="also log the report into the manifest's W&B group")

    command("renderers", cmd_renderers, "every renderer: what it draws, the summary and reference keys it reads")

    p = command("sync", cmd_sync, "upload offline W&B runs not uploaded yet (needs W&B credentials)")
    p.add_argument("--entity", default=None, help="W&B entity (default: your login's)")
    p.add_argument("--project", default=None, help="W&B project (default: $REPRO_WANDB_PROJECT or repro)")

    p = command("pull", cmd_pull, "bring a manifest's runs from its W&B group into the store")
    p.add_argument("name", help="a manifest (name or path)")
    p.add_argument("--entity", default=None, help="W&B entity (default: your login's)")
    p.add_argument("--project", default=None, help="W&B project (default: $REPRO_WANDB_PROJECT or repro)")

    p = command("dashboard", cmd_dashboard, "compare stored runs in a local web page (trackio; no account)")
    p.add_argument("name", nargs="?", help="a manifest: import only its runs and open on them")
    p.add_argument("--port", type=int, default=None, help="default: the first free port from 7860")
    p.add_argument("--host", default=None, help="default 127.0.0.1 (0.0.0.0 to serve the network)")

    p = command("sample", cmd_sample, "generate from a stored run (text, image grid or audio)")
    p.add_argument("run", help="run id (or unique prefix) or run directory")
    p.add_argument("--n", type=int, default=4, help="number of samples")
    p.add_argument("--length", type=int, default=None, help="symbols per sample (default: the block)")
    p.add_argument("--temperature", type=float, default=1.0, help="softmax temperature (default 1.0)")
    p.add_argument("--prompt", default=None, help="text to continue (text runs)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sampler")

    p = command("bench", None, "benchmarks: " + ", ".join(BENCHES))
    bench = p.add_subparsers(dest="bench", metavar="BENCH")
    for name, module in BENCHES.items():
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        q = bench.add_parser(
            name, parents=[common], help=(mod.__doc__ or "").strip().splitlines()[0] if mod.__doc__ else None
        )
        q.add_argument("--json", action="store_true", help="print the records as JSON")
        mod.add_arguments(q)
        q.set_defaults(func=cmd_bench, bench_module=mod)

    data_cli.register(sub, parents=[common])
    return parser


RESULTS_HELP = "results root (default: $REPRO_RESULTS or results/)"
SCALE_HELP = (
    "tiny (the default: 2 CPU cores, minutes per run), cpu (2 CPU cores, up to 30 min), small (one "
    "GPU), paper (the paper's configuration), or another scale the manifest defines"
)
SAVE_HELP = "write the manifest with its overrides to PATH (it includes the original; `repro validate PATH`)"
# bash/zsh: complete manifest names from `repro list --names`
COMPLETION = {
    "bash": '_repro_manifests() { compgen -W "$(repro list --names 2>/dev/null)" -- "$1"; }',
    "zsh": "_repro_manifests() { compadd $(repro list --names 2>/dev/null) }",
}


def _root(args) -> Path:
    return results_root(args.results)


def _args(args) -> list[str]:
    return overrides.args_of(getattr(args, "overrides", []) or [], getattr(args, "multirun", False))


def _select(args) -> list[manifests.Manifest]:
    found = lookup.select(args.name, _args(args), _root(args))
    if len(found) > 1:
        print(f"{args.name}: {len(found)} manifests: {', '.join(m.name for m in found)}", flush=True)
    return found


def _save(args, found: list[manifests.Manifest]) -> None:
    if not args.save:
        return
    if len(found) != 1 or not found[0].args:
        raise UserError("--save: needs one manifest and at least one KEY=VALUE override")
    print(f"wrote {overrides.save(found[0], Path(args.save))}")


def cmd_list(args) -> int:
    root = _root(args)
    found = sorted(manifests.discover().items())
    if args.names:
        print("\n".join(name for name, _ in found))
        return 0
    records = []
    for name, path in found:
        try:
            m = lookup.load(path)
            specs = m.expand(args.scale) if args.scale in m.scale_names() else []
            done = sum(RunDir(root, m.name, s.run_id).finished for s in specs)
            records.append(
                {
                    "name": name,
                    "title": m.title,
                    "paper": m.paper,
                    "path": str(path),
                    "scales": m.scale_names(),
                    "runs": len(specs),
                    "finished": done,
                }
            )
        except UserError as err:
            records.append({"name": name, "title": None, "path": str(path), "error": str(err)})
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    rows = [
        (r["name"], r["title"] or f"INVALID: {r['error']}", str(r.get("runs", "-")), str(r.get("finished", "-")))
        for r in records
    ]
    print_table([("manifest", "title", f"runs@{args.scale}", "finished"), *rows])
    return 0


def cmd_show(args) -> int:
    found = _select(args)
    out = []
    for m in lookup.with_parts(found, _args(args)):
        specs = m.expand(args.scale)
        keys = list(m.grid_for(args.scale))
        shown = keys + [k for k in m.set if k not in keys]  # the overrides' keys are columns too
        if args.json:
            out.append(
                {
                    "manifest": m.name,
                    "title": m.title,
                    "scale": args.scale,
                    "command": m.command,
                    "runs": [{"run_id": s.run_id, "cell": s.cell, **s.resolved()} for s in specs],
                }
            )
            continue
        rows = [
            (
                s.run_id,
                *(str(s.cell[k] if k in s.cell else _dotted(s.resolved(), k)) for k in shown),
                s.data.label,
                str(s.data.block),
                s.family,
                str(s.train.steps),
                str(s.train.batch_size),
            )
            for s in specs
        ]
        print(f"{m.name}: {m.title} [scale {args.scale}]")
        print_table([("run_id", *shown, "data", "block", "family", "steps", "batch"), *rows])
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    _save(args, found)
    return 0


def _dotted(tree: dict, key: str):
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def cmd_validate(args) -> int:
    paths = [Path(p) for p in args.paths] or list(manifests.discover().values())
    for path in paths:
        m = lookup.load(path)
        print(f"ok  {m.name}  ({path})  scales: {', '.join(m.scale_names())}")
    return 0


def cmd_run(args) -> int:
    from repro import distributed, runner  # torch and Lightning (see the module docstring), as every lazy import here
    from repro.tracking import resolve_mode

    signals.install()
    for option, what in (("devices", "devices"), ("num_nodes", "nodes")):
        if getattr(args, option) < 1:
            raise UserError(
                f"--{option.replace('_', '-')} {getattr(args, option)}: allowed: a positive number of {what}"
            )
    _check_launcher(args)
    if args.launcher and distributed.launched_by():
        raise UserError(
            f"--launcher {args.launcher}: this process is one of those {distributed.launched_by()} started; "
            "submit from a plain shell"
        )
    world = None if args.launcher else distributed.world(args.devices, args.num_nodes)
    found = _select(args)
    plan = lookup.with_parts(found, _args(args))
    for m in [m for m in plan if m.base is None]:
        print(f"{m.name} trains nothing; `repro report {m.command}` draws it")
    plan = [m for m in plan if m.base is not None]
    root = _root(args)
    specs = [
        (m, runner.with_max_steps(s, args.max_steps))
        for m in plan
        for s in runner.select(m.expand(args.scale), args.only)
    ]
    if args.run_id is not None:
        specs = [(m, s) for m, s in specs if s.run_id == args.run_id]
        if not specs:
            raise UserError(f"--run-id {args.run_id}: no run of {args.name} at scale {args.scale} has this id")

    def prepare() -> None:  # rank 0's alone: the other ranks wait for it (and raise what it raised)
        _save(args, found)
        if not args.dry_run:
            _ensure_data(specs)

    if world is None:
        prepare()
    else:
        for m, s in specs:
            runner.check_processes(s, m, world)
        distributed.start(world)
        distributed.first(world, prepare)
    echo = say if world is None or world.leads else _quiet
    if args.dry_run:
        for m, s in specs:
            state = _state(RunDir(root, m.name, s.run_id))
            why = data.missing(s.data.name, **s.data.options()) if state != "finished" else None
            echo(f"{s.run_id}  {m.name}  {s.cell_name if s.cell else '-'}  [{state}{'; ' + why if why else ''}]")
        return 0
    if args.launcher:
        return _launch(
            args,
            root,
            [(m.name, s.run_id) for m, s in specs if not RunDir(root, m.name, s.run_id).finished],
            len(specs),
        )
    known = manifests.discover()
    mode = resolve_mode(args.no_wandb)
    failed = busy = 0
    started = time.monotonic()
    for i, (m, spec) in enumerate(specs, 1):
        left = sum(s.train.steps for n, s in specs[i - 1 :] if not RunDir(root, n.name, s.run_id).finished)
        line = progress.plan_line(i, len(specs), time.monotonic() - started, left, _per_step(root, specs))
        echo(f"{line}  {m.name} {spec.cell_name} ({spec.run_id}, scale {spec.scale}, data {spec.data.label})")
        try:
            outcome = runner.run_spec(
                spec, m, root, devices=args.devices, num_nodes=args.num_nodes, wandb_mode=mode, echo=echo
            )
        finally:  # bad data writes nothing; once a run is stored, the store knows its manifest's name
            if world.leads and RunDir(root, m.name, spec.run_id).path.exists():
                _remember(root, m, known)
        s = outcome.summary
        if outcome.status in ("failed", "busy"):
            failed += outcome.status == "failed"
            busy += outcome.status == "busy"
            continue
        scores = " / ".join(f"{split} {s[f'{split}_bits']:.4f}" for split in spec.eval.splits if f"{split}_bits" in s)
        echo(
            f"  {outcome.status}: {scores or 'no split scored'} bits per {s.get('dataset_unit', 'symbol')} "
            f"on {s.get('dataset')}"
        )
    return 1 if failed else 3 if busy else 0


def _ensure_data(specs) -> None:
    for name, options in {(s.data.name, tuple(sorted(s.data.options().items()))): 0 for _, s in specs}:
        data.ensure(name, say, **dict(options))


def _quiet(line: str) -> None:
    """A follower rank's lines: rank 0 says everything."""


SLURM_OPTIONS = ("partition", "gpus_per_node", "cpus_per_task", "time", "mem", "slurm_arg")


def _check_launcher(args) -> None:
    """One-line errors for launcher options that do not fit together (before anything is written)."""
    given = [f"--{o.replace('_', '-')}" for o in SLURM_OPTIONS if getattr(args, o) not in (None, [])]
    if args.launcher != "slurm" and given:
        raise UserError(f"{', '.join(given)}: SLURM options; allowed only with --launcher slurm")
    if args.max_parallel is not None and (args.launcher is None or args.max_parallel < 1):
        raise UserError(f"--max-parallel {args.max_parallel}: allowed: a positive number, with --launcher local|slurm")
    if args.launcher == "local" and args.num_nodes != 1:
        raise UserError(f"--num-nodes {args.num_nodes}: --launcher local runs on this machine; allowed: 1")
    if args.gpus_per_node not in (None, args.devices):
        raise UserError(
            f"--gpus-per-node {args.gpus_per_node}: each of a node's --devices {args.devices} processes trains on "
            f"one GPU; allowed: {args.devices} (or --devices {args.gpus_per_node})"
        )
    for option in ("gpus_per_node", "cpus_per_task", "time"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            raise UserError(f"--{option.replace('_', '-')} {getattr(args, option)}: allowed: a positive number")
    launch.slurm_args(args.slurm_arg)
    if args.launcher:
        try:
            import submitit  # noqa: F401  (an optional extra)
        except ImportError:
            raise UserError(f"--launcher {args.launcher} needs submitit: pip install -e '.[cluster]'") from None


def _launch(args, root: Path, runs: list[tuple[str, str]], total: int) -> int:
    if len(runs) < total:
        say(f"{total - len(runs)} of {total} run(s) already finished: not submitted")
    if not runs:
        return 0
    if args.launcher == "local":
        return launch.run_local(args, root, runs, args.max_parallel or 1, say, main)
    options = launch.Slurm(
        args.partition,
        args.num_nodes,
        args.devices,
        args.gpus_per_node,
        args.cpus_per_task,
        args.time,
        args.mem,
        launch.slurm_args(args.slurm_arg),
    )
    return launch.submit_slurm(args, root, runs, options, args.max_parallel, say, main)


def _state(run: RunDir) -> str:
    """A run's status as `repro run` sees it (a corrupt summary or spec: the run is redone)."""
    try:
        state = run.summary().get("status", "to run")
    except CorruptFile:
        return "corrupt summary: redone by run"
    return "corrupt spec: redone by run" if state == "finished" and not run.finished else state


def _remember(root: Path, m, known: dict[str, Path]) -> None:
    """Record a manifest that discovery does not find (or one with overrides), so that its name works later."""
    if m.args or m.name not in known or known[m.name].resolve() != m.path.resolve():
        store.record_source(root, m.name, m.path, m.args)


def _per_step(root: Path, specs: list) -> float | None:
    """Mean stored seconds per step of the finished runs among ``specs`` (None before any)."""
    runs = [RunDir(root, m.name, s.run_id) for m, s in specs]
    known = [run.summary() for run in runs if run.finished]  # a corrupt summary is not finished
    values = [k["seconds_per_step"] for k in known if k.get("seconds_per_step")]
    return sum(values) / len(values) if values else None


def cmd_status(args) -> int:
    root = _root(args)
    names = [m.name for m in _select(args)] if args.name else [None]
    scanned = [scan(root, name) for name in names]
    runs = [r for frame, _ in scanned for r in frame.to_dict("records")]
    corrupt = [line for _, lines in scanned for line in lines]
    cols = ("manifest", "run_id", "scale", "status", "steps", "valid_bits", "test_bits", "mfu")
    jobs = _jobs(root, names, runs)
    if jobs:
        cols += ("job", "job_state")
    if args.json:
        print(json.dumps([{c: _json_value(r.get(c)) for c in cols} for r in runs], indent=2))
        for line in corrupt:  # stdout stays one JSON document
            print(f"corrupt: {line}", file=sys.stderr)
        return 0
    if not runs and not corrupt:
        print(f"no stored runs under {root}/runs")
        return 0
    if runs:
        print_table([cols, *([_fmt(r.get(c)) for c in cols] for r in runs)])
    for line in corrupt:
        print(f"corrupt: {line}")
    return 0


def _jobs(root: Path, names: list, runs: list[dict]) -> dict:
    """The job records of the shown manifests' runs, each with its state; a submitted run that has not
    started yet (nothing stored) is added to ``runs`` as ``submitted``."""
    jobs = {key: job for key, job in launch.records(root).items() if names == [None] or key[0] in names}
    stored = {(r["manifest"], r["run_id"]): r for r in runs}
    for key in jobs:
        if key not in stored:
            stored[key] = {"manifest": key[0], "run_id": key[1], "status": "submitted"}
            runs.append(stored[key])
    for key, job in jobs.items():
        stored[key].update(job=job["job_id"], job_state=launch.state(job, stored[key].get("status")))
    return jobs


def cmd_report(args) -> int:
    root = _root(args)
    if args.all:
        print(f"wrote {report.render_all(root)}")
        return 0
    if not args.name:
        raise UserError("report: name a manifest or pass --all")
    found = _select(args)
    for manifest in lookup.with_parts(found, _args(args)) if _args(args) else found:
        path, results = report.render(manifest, root)
        print(path.read_text())
        print(f"wrote {path}")
        if args.wandb:
            from repro.tracking import resolve_mode  # Lightning and wandb
            from repro.wandb_report import log_report

            mode = resolve_mode(False)
            print(f"logged to W&B ({mode}) as run {log_report(manifest, root, path, results, mode)}")
    return 0


def cmd_renderers(args) -> int:
    for r in analysis.describe():
        print(f"{r['name']}: {r['draws']}")
        print(f"    reads: {', '.join(r['reads']) or 'nothing from the runs'}")
        if r["reference"]:
            print(f"    reference: {', '.join(f'{k} ({t})' for k, t in r['reference'].items())}")
    return 0


def cmd_sync(args) -> int:
    from repro.sync import sync  # Lightning (through repro.tracking)

    done = sync(_root(args), args.entity, args.project)
    print(f"synced {len(done.synced)}, skipped {len(done.skipped)} already synced, failed {len(done.failed)}")
    return 1 if done.failed else 0


def cmd_pull(args) -> int:
    from repro.pull import describe, public_api, pull  # wandb, Lightning

    manifest = lookup.one(args.name, [], _root(args))
    done = pull(manifest, _root(args), public_api(args.entity, args.project), args.entity, args.project)
    print(describe(done))
    return 0


def cmd_dashboard(args) -> int:
    from repro import dashboard  # Lightning (through repro.tracking)

    root = _root(args)
    name = lookup.one(args.name, [], root).name if args.name else None
    done = dashboard.import_runs(root, name)
    print(
        f"trackio project {dashboard.PROJECT!r} in {dashboard.trackio_dir(root)}: imported "
        f"{len(done.imported)} run(s), {len(done.present)} already there, {len(done.unfinished)} unfinished "
        "(imported once finished)",
        flush=True,
    )
    dashboard.serve(root, done.ids if name else [], args.port, args.host)
    return 0


def cmd_sample(args) -> int:
    import torch  # torch, Lightning, matplotlib

    from repro import runner, sampling

    run = runner.find_run(_root(args), args.run)
    model, spec, vocab, info = runner.load_trained(run)
    prompt = vocab.encode(args.prompt) if args.prompt else None
    room = spec.data.block - (len(prompt) if prompt is not None else 1) + 1
    length = min(args.length or room, room)
    generator = torch.Generator().manual_seed(args.seed)
    samples = sampling.sample(
        model, vocab.size, args.n, length, temperature=args.temperature, prompt=prompt, generator=generator
    )
    for path in sampling.write_samples(samples, vocab, info, run.path / "samples", f"seed{args.seed}"):
        print(f"wrote {path}")
    if info.kind == "text":
        print(vocab.decode(samples[0].numpy()))
    return 0


def cmd_bench(args) -> int:
    records = args.bench_module.main(args)
    for rec in records:  # a training step's achieved model FLOP/s and MFU (docs/throughput.md)
        if "error" not in rec:
            rec.update(throughput.bench_fields(_root(args), rec))
    out = _root(args) / "bench" / f"{args.bench}.json"
    atomic.write_text(out, json.dumps(records, indent=2) + "\n")
    if args.json:
        print(json.dumps(records, indent=2))
    elif records:
        cols = list(records[0])
        print_table([cols, *([_fmt(r.get(c)) for c in cols] for r in records)])
        print(f"stored in {out}")
    return 0


def _json_value(value):
    """numpy/pandas scalars as Python's, NaN as None (JSON has no NaN)."""
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and math.isnan(value) else value


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


if __name__ == "__main__":
    sys.exit(main())
