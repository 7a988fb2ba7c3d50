"""``repro run``: train a selection's runs here, one after another, or hand them to a launcher as job
descriptions (:class:`repro.train.launch.Job`), which each job executes here (:func:`execute`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from repro import data, progress
from repro.cli import eta, exits, filters
from repro.cli import options as opts
from repro.cli.common import at_scale, override_args, save, select, store_root, stored
from repro.cli.status import run_state
from repro.config import lookup
from repro.config import manifest as manifests
from repro.config.keys import names
from repro.config.metrics import split_gap
from repro.errors import StoreError, UserError
from repro.files import atomic
from repro.progress import say
from repro.registry import Command
from repro.store import runs as store
from repro.store.runs import RunDir
from repro.train import launch, quiet, signals

INTERRUPTED = "finished runs are stored; an unfinished run resumes from its last checkpoint"  # Ctrl-C's line


def cmd_run(args) -> int:
    from repro.train import distributed  # torch and Lightning, as every lazy import here

    signals.install()
    quiet.configure(args.verbose)
    _check_launcher(args)
    if args.full_eval and args.max_steps is None:
        raise UserError("--full-eval: allowed only with --max-steps (an uncapped run scores every target anyway)")
    if args.retrain_checkpoint and (args.launcher or args.max_steps is not None or args.devices * args.num_nodes > 1):
        raise UserError(
            "--retrain-checkpoint: retrains here, in one process, the runs as stored; allowed without "
            "--launcher, --max-steps, --devices and --num-nodes"
        )
    if args.launcher and distributed.launched_by():
        raise UserError(
            f"--launcher {args.launcher}: this process is one of those {distributed.launched_by()} started; "
            "submit from a plain shell"
        )
    world = None if args.launcher else distributed.world(args.devices, args.num_nodes)
    if args.limit_bytes is not None:
        args.overrides.append(f"eval.prefix={args.limit_bytes}")
    found = select(args)
    plan = at_scale(lookup.with_parts(found, override_args(args)), args.scale)
    for m in [m for m in plan if m.base is None]:
        print(f"{m.name} trains nothing; `repro report {m.command}` draws it")
    plan = [m for m in plan if m.base is not None]
    root = store_root(args)
    for m in plan:
        for cell, why in m.left_out(args.scale) if args.scale in m.scale_names() else []:
            if _picked(cell, args.only):
                say(f"left out, its overrides make this cell invalid: {why}")
    specs, caps = resolve(plan, args.scale, args.seeds, args.only, args.max_steps, args.run_id, args.full_eval)
    if args.run_id is not None and not specs:
        raise UserError(f"--run-id {args.run_id}: no run of {args.name} at scale {args.scale} has this id")

    def prepare() -> None:  # rank 0's alone: the other ranks wait for it (and raise what it raised)
        save(args, found)
        if not args.dry_run:
            _ensure_data(specs)

    echo = _start(world, specs, prepare)
    if args.max_steps is not None:
        scored = "score every target (--full-eval)" if args.full_eval else _prefix(caps)
        echo(
            f"--max-steps {args.max_steps}: capped runs have run ids of their own and are kept out of reports; "
            f"`repro run {args.name} train.steps={args.max_steps}` trains a shortened manifest that reports them; "
            f"they {scored}"
        )
    unfinished = [(m, s) for m, s in specs if not RunDir(root, m.name, s.run_id).finished]
    trains = [s for _, s in unfinished if s.train.weights is None]  # pretrained weights: scored, no seeds
    power = _power(plan, args.scale, args.seeds) if trains else ""
    timings = eta.Timings(eta.default_roots(root))
    if args.dry_run:
        for m, s in specs:
            state = run_state(RunDir(root, m.name, s.run_id))
            why = data.missing(s.data.name, **s.data.options()) if state != "finished" else None
            echo(f"{s.run_id}  {m.name}  {s.cell_name if s.cell else '-'}  [{state}{'; ' + why if why else ''}]")
        echo(eta.plan([s for _, s in unfinished], timings, caps) + power)
        return 0
    if power:  # before training: what these seeds can decide (the report gives each claim's MDE after)
        echo(power.removeprefix("; "))
    if args.launcher:
        todo, parallel = [s for _, s in unfinished], args.max_parallel or 1

        def left(run_ids: list[str], elapsed: dict[str, float]) -> str:  # the ETA of what is not done yet
            timings.refresh()  # the runs the jobs finished time the ones left of their shape
            return eta.plan([s for s in todo if s.run_id in run_ids], timings, caps, parallel, elapsed)

        if todo:
            echo(left([s.run_id for s in todo], {}))
        return _launch(args, root, [(m.name, _job(args, root, s.run_id)) for m, s in unfinished], len(specs), left)
    if not args.retrain_checkpoint and specs and not unfinished:
        echo(
            f"all {len(specs)} run(s) already finished under {root}/: nothing to train (`repro report "
            f"{args.name}` reports them; `--results DIR` trains them afresh into DIR)"
        )
        return 0
    return _train(
        specs, root, world, echo, timings, args.devices, args.num_nodes, args.no_wandb, args.retrain_checkpoint, caps
    )


def execute(job: launch.Job) -> int:
    """What a launched job runs: the one run its description names, resolved as ``repro run`` resolved it
    and trained here (each task of a SLURM job executes it: the ranks of one run)."""
    from repro.train import distributed  # torch and Lightning

    signals.install()
    quiet.configure(job.verbose)
    world = distributed.world(job.devices, job.num_nodes)
    overrides = list(job.overrides)
    found = lookup.with_parts(lookup.select(job.ref, overrides, stored(job.results), job.access), overrides)
    plan = [m for m in found if m.base is not None and job.scale in m.scale_names()]
    specs, caps = resolve(plan, job.scale, job.seeds, job.only, job.max_steps, job.run_id, job.full_eval)
    if not specs:
        raise UserError(
            f"job of run {job.run_id}: no run of {job.ref} at scale {job.scale} has this id any more (its "
            "manifest changed after it was submitted); submit it again"
        )
    echo = _start(world, specs, lambda: _ensure_data(specs))
    timings = eta.Timings(eta.default_roots(job.results))
    return _train(specs, job.results, world, echo, timings, job.devices, job.num_nodes, job.no_wandb, False, caps)


def resolve(
    plan,
    scale: str,
    seeds: int | None,
    only,
    max_steps: int | None,
    run_id: str | None = None,
    full_eval: bool = False,
) -> tuple[list, dict[str, int]]:
    """The (manifest, spec) pairs a selection trains: each manifest's runs at ``scale`` (``--seeds``),
    kept by ``--only``, capped by ``--max-steps`` (a capped run has an id of its own), narrowed to
    ``run_id`` last; and, unless ``full_eval``, the runs the cap shortened, each with the targets of each
    split its evaluation scores (``train.val_tokens``: docs/evaluation.md). ``repro run`` and each job it
    launches resolve with this one function, so that a job finds the very run its parent submitted."""
    specs, caps = [], {}
    for m in plan:
        for s in filters.select(m.expand(scale, seeds=seeds), only):
            short = filters.with_max_steps(s, max_steps)
            if short is not s and not full_eval:
                caps[short.run_id] = short.train.val_tokens
            if run_id is None or short.run_id == run_id:
                specs.append((m, short))
    return specs, caps


def _prefix(caps: dict[str, int]) -> str:
    """What a capped run's evaluation scores, in words."""
    sizes = sorted(set(caps.values()))
    if not sizes:
        return "score every target (none of these runs is longer than the cap)"
    shown = " or ".join(f"{n:,}" for n in sizes)
    return (
        f"score each split's first {shown} targets (train.val_tokens, the quick validation's prefix); "
        "--full-eval scores every target"
    )


def _start(world, specs, prepare) -> Callable[[str], None]:
    """``prepare`` done (rank 0's alone, the other ranks wait for it) and the ranks joined; what prints a line
    (a follower rank prints nothing)."""
    from repro.train import distributed, runner

    if world is None:
        prepare()
    else:
        for m, s in specs:
            runner.check_processes(s, m, world)
        distributed.start(world)
        distributed.first(world, prepare)
    return say if world is None or world.leads else _quiet


def _train(
    specs,
    root: Path,
    world,
    echo,
    timings,
    devices: int,
    num_nodes: int,
    no_wandb: bool,
    retrain_checkpoint: bool,
    caps: dict[str, int],
) -> int:
    """Train ``specs`` (manifest, spec) one after another into ``root`` (``retrain_checkpoint``: each stored
    run's checkpoint trained again; ``caps``: run id -> the targets of each split a capped run scores):
    the exit status of ``repro run``."""
    from repro.replay import retrain, samebits
    from repro.track.loggers import resolve_mode, wandb_dir
    from repro.train import runner, throughput

    known = manifests.discover()
    mode = resolve_mode(no_wandb)
    if mode != "disabled" and (world is None or world.leads):  # before any run is written: W&B's folder
        atomic.make_dirs(wandb_dir(root))
    if mode != "disabled" and not retrain_checkpoint:  # say where: the Quick start wrote them unannounced
        upload = "`repro sync` uploads them" if mode == "offline" else "sent to W&B as they train"
        echo(
            f"W&B {mode}: runs logged under {wandb_dir(root)}/ ({upload}; --no-wandb or WANDB_MODE=disabled "
            "turns W&B off)"
        )
    runner.settle_isa(root, [s for _, s in specs])  # a resumed run's instruction set first (docs/reproducibility.md)
    failed = busy = 0
    started = time.monotonic()
    for i, (m, spec) in enumerate(specs, 1):
        timings.refresh()  # the runs this session finished time the ones left of their shape
        todo = [s for n, s in specs[i - 1 :] if _to_train(RunDir(root, n.name, s.run_id), retrain_checkpoint)]
        echo(
            f"[{i}/{len(specs)}] elapsed {progress.duration(time.monotonic() - started)}, {eta.plan(todo, timings, caps)}"
            f"\n  {m.name} {spec.cell_name + ' ' if spec.cell else ''}({spec.run_id}, scale {spec.scale}, "
            f"data {spec.data.label})"
        )
        try:
            if spec.train.weights is not None:  # the authors' weights: scored, not trained (repro.pretrained)
                outcome = _score(spec, m, root, echo, devices * num_nodes)
            elif retrain_checkpoint:
                outcome = retrain.checkpoint(spec, m, root, echo=echo)
            else:
                outcome = runner.run_spec(
                    spec,
                    m,
                    root,
                    devices=devices,
                    num_nodes=num_nodes,
                    wandb_mode=mode,
                    echo=echo,
                    eval_targets=caps.get(spec.run_id),
                )
        except BaseException:  # the failure in flight is the one to tell (a full disk fails this write too)
            with contextlib.suppress(StoreError):
                _remember(root, m, spec, known, world)
            raise
        _remember(root, m, spec, known, world)
        s = outcome.summary
        if outcome.status in ("failed", "busy"):
            failed += outcome.status == "failed"
            busy += outcome.status == "busy"
            continue
        scores = " / ".join(f"{split} {s[f'{split}_bits']:.4f}" for split in spec.eval.splits if f"{split}_bits" in s)
        prefix = f" (each split's first {s['eval_targets_cap']:,} targets)" if s.get("eval_targets_cap") else ""
        echo(
            f"  {outcome.status}: {scores or 'no split scored'} bits per {s.get('dataset_unit', 'symbol')} "
            f"on {s.get('dataset')}{prefix}"
        )
        if gap := split_gap(s.get("valid_bits"), s.get("test_bits")):
            echo(f"  note: {gap}")
        if (s.get("mfu") or 0) > 1:
            echo(f"  mfu {s['mfu']:.3f}: {throughput.ABOVE_PEAK}")
        if outcome.status == "finished" and not retrain_checkpoint:  # trained now: beside the shipped run's bits
            shipped = RunDir(store.results_root(None), m.name, spec.run_id)
            if line := samebits.against_stored(shipped, RunDir(root, m.name, spec.run_id)):
                echo(line)
    return 1 if failed else 3 if busy else 0


def _score(spec, m, root: Path, echo, processes: int):
    """A run of pretrained weights, scored in this one process."""
    from repro.pretrained import imported

    if processes > 1:
        raise UserError(
            f"run {spec.run_id} scores pretrained weights in one process; allowed: --devices 1 --num-nodes 1"
        )
    return imported.score(spec, m, root, echo)


def _to_train(run: RunDir, retrain_checkpoint: bool) -> bool:
    """Whether ``run`` trains in this session: unfinished, or (``--retrain-checkpoint``) without a checkpoint."""
    return not run.finished or (retrain_checkpoint and run.last_checkpoint is None)


def _power(plan, scale: str, seeds: int | None) -> str:
    """``; <what the seeds can decide>`` for a plan with claims at ``scale`` (repro.claims.power.power_note), else ""."""
    from repro.claims.power import power_note

    judged = [m for m in plan if any(c.scales is None or scale in c.scales for c in m.claims)]
    return "; " + power_note(seeds or max(m.replicates(scale) for m in judged)) if judged else ""


def _picked(cell: dict, only: list[str]) -> bool:
    """Whether ``--only`` keeps this cell (each KEY=VALUE: a key equal to KEY or ending in .KEY)."""
    pairs = [item.partition("=")[::2] for item in only]
    return all(any(names(key, k) and str(v) == value for k, v in cell.items()) for key, value in pairs)


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
    if args.max_parallel is not None and args.launcher is None:
        raise UserError(f"--max-parallel {args.max_parallel}: allowed: a positive number, with --launcher local|slurm")
    if args.launcher == "local" and args.num_nodes != 1:
        raise UserError(f"--num-nodes {args.num_nodes}: --launcher local runs on this machine; allowed: 1")
    if args.gpus_per_node not in (None, args.devices):
        raise UserError(
            f"--gpus-per-node {args.gpus_per_node}: each of a node's --devices {args.devices} processes trains on "
            f"one GPU; allowed: {args.devices} (or --devices {args.gpus_per_node})"
        )
    launch.slurm_args(args.slurm_arg)
    if args.launcher:
        try:
            import submitit  # noqa: F401  (an optional extra)
        except ImportError:
            raise UserError(f"--launcher {args.launcher} needs submitit: pip install -e '.[cluster]'") from None


def _job(args, root: Path, run_id: str) -> launch.Job:
    """The description of the job that trains ``run_id`` of this command's selection."""
    return launch.Job(
        ref=str(Path(args.name).resolve()) if Path(args.name).is_file() else args.name,
        overrides=tuple(override_args(args)),
        scale=args.scale,
        seeds=args.seeds,
        run_id=run_id,
        results=root.resolve(),
        access=args.access,
        devices=args.devices,
        num_nodes=args.num_nodes,
        max_steps=args.max_steps,
        full_eval=args.full_eval,
        only=tuple(args.only),
        no_wandb=args.no_wandb,
        verbose=args.verbose,
    )


def run_job(job: launch.Job) -> launch.Ended:
    """What a ``--launcher`` job runs: :func:`execute` as a ``repro`` process, with its exit status and
    the one line it printed when it failed."""
    told: list[str] = []
    code = exits.command(lambda: execute(job), told, INTERRUPTED)
    return launch.Ended(code, told[-1].removeprefix("error: ") if told else None)


def _launch(args, root: Path, runs: list[tuple[str, launch.Job]], total: int, left) -> int:
    if len(runs) < total:
        say(f"{total - len(runs)} of {total} run(s) already finished: not submitted")
    if not runs:
        return 0
    if args.launcher == "local":
        return launch.run_local(root, runs, args.max_parallel or 1, say, run_job, left)
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
    return launch.submit_slurm(args.name, root, runs, options, args.max_parallel, say, run_job)


def _remember(root: Path, m, spec, known: dict[str, Path], world) -> None:
    """Once ``spec``'s run is stored (bad data writes nothing), record its manifest where discovery does not
    find it (or it has overrides), so that its name works later; rank 0 alone."""
    if not (world.leads and RunDir(root, m.name, spec.run_id).path.exists()):
        return
    if m.args or m.name not in known or known[m.name].resolve() != m.path.resolve():
        store.record_source(root, m.name, m.path, m.args)


def add_arguments(p, parents) -> None:
    """``repro run``'s options (its parser's ``interrupted``: what Ctrl-C leaves)."""
    p.set_defaults(interrupted=INTERRUPTED)
    opts.manifest_args(p)
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the runs whose grid cell has this value (repeatable; KEY may be a dotted suffix)",
    )
    p.add_argument(
        "--max-steps",
        type=opts.positive("steps"),
        default=None,
        metavar="N",
        help="cap every run at N steps (a different run id: kept out of reports); a capped run scores each "
        "split's first train.val_tokens targets (the quick validation's), unless --full-eval",
    )
    p.add_argument(
        "--full-eval",
        action="store_true",
        help="with --max-steps: score every target of each split, as an uncapped run does",
    )
    p.add_argument(
        "--limit-bytes",
        type=opts.positive("tokens"),
        default=None,
        metavar="N",
        help="runs of pretrained weights (scale pretrained): score only each split's first N tokens, a quick "
        "look (the override eval.prefix=N: a manifest of its own, reported apart)",
    )
    opts.seeds_arg(p, "train")
    p.add_argument(
        "--dry-run", action="store_true", help="list the runs, their state and missing datasets; train nothing"
    )
    p.add_argument(
        "--devices",
        type=opts.positive("devices"),
        default=1,
        metavar="G",
        help="processes (accelerators) per node (default 1)",
    )
    p.add_argument(
        "--num-nodes",
        "--nodes",
        dest="num_nodes",
        type=opts.positive("nodes"),
        default=1,
        metavar="N",
        help="nodes per run (default 1): started by torchrun or srun, or allocated by --launcher slurm",
    )
    p.add_argument("--no-wandb", action="store_true", help="do not log to Weights & Biases")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print the libraries' lines (Lightning's device and stop lines, W&B's banners and summaries)",
    )
    p.add_argument("--save", metavar="PATH", default=None, help=opts.SAVE_HELP)
    p.add_argument("--run-id", default=None, metavar="ID", help="only the run with this id (what a job runs)")
    p.add_argument(
        "--retrain-checkpoint",
        action="store_true",
        help="train finished runs that have no checkpoint (checkpoints are not committed) again, check that "
        "the retrained run reproduces the stored bits, and keep its checkpoint (for `repro sample`); one that "
        "does not stays under <results>/.retrain, which `repro sample` loads",
    )
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
        type=opts.positive(),
        default=None,
        metavar="K",
        help="local: processes at a time (default 1); slurm: array tasks at a time",
    )
    cluster.add_argument("--partition", default=None, help="SLURM partition")
    cluster.add_argument("--gpus-per-node", type=opts.positive(), default=None, metavar="G", help="SLURM GPUs per node")
    cluster.add_argument("--cpus-per-task", type=opts.positive(), default=None, metavar="C", help="SLURM CPUs per task")
    cluster.add_argument(
        "--time", type=opts.positive(), default=None, metavar="MIN", help="SLURM time limit in minutes"
    )
    cluster.add_argument("--mem", default=None, metavar="M", help="SLURM memory per node (e.g. 32G)")
    cluster.add_argument(
        "--slurm-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other sbatch option, without its dashes (repeatable: --slurm-arg qos=high)",
    )


COMMAND = Command("run", "train every run of a manifest or group (finished runs are skipped)", add_arguments, cmd_run)
