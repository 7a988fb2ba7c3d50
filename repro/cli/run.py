"""``repro run``: select, plan (:mod:`repro.plan`), print, execute (:mod:`repro.session`): a selection's
runs trained here one after another, or handed to a launcher as jobs."""

from __future__ import annotations

from pathlib import Path

from repro.cli import options as opts
from repro.cli.common import override_args, select, store_root
from repro.config import lookup
from repro.errors import UserError
from repro.plan import runs as plans
from repro.plan.selection import at_scale, save
from repro.registry import Command
from repro.session.exits import RUN_INTERRUPTED
from repro.train import launch, quiet, signals


def cmd_run(args) -> int:
    from repro.session import jobs, local  # torch and Lightning
    from repro.train import distributed

    signals.install()
    quiet.configure(args.verbose)
    _check(args, distributed.launched_by())
    world = None if args.launcher else distributed.world(args.devices, args.num_nodes)
    if args.limit_bytes is not None:
        args.overrides.append(f"eval.prefix={args.limit_bytes}")
    found = select(args)
    chosen, root = at_scale(lookup.with_parts(found, override_args(args)), args.scale), store_root(args)
    job, slurm = (_job(args, root), _slurm(args)) if args.launcher else (None, None)  # each job's, less its run id

    def prepare() -> None:  # rank 0's alone: the other ranks wait for it (and raise what it raised)
        save(found, args.save)
        if not args.dry_run:
            local.ensure_data(plan)

    asked = {k: getattr(args, k) for k in ("seeds", "only", "max_steps", "run_id", "full_eval")}
    plan = plans.make(chosen, root, args.scale, **asked)
    if args.run_id is not None and not plan.runs:
        raise UserError(f"--run-id {args.run_id}: no run of {args.name} at scale {args.scale} has this id")
    echo = local.start(world, plan, prepare)
    if args.max_steps is not None:
        echo(
            f"--max-steps {args.max_steps}: capped runs have run ids of their own, kept out of the manifest's "
            f"report; `repro report {args.name} --max-steps {args.max_steps}` reports them, labelled capped; "
            f"they {'score every target (--full-eval)' if args.full_eval else plan.scored}"
        )
    if args.dry_run:
        for line in plan.table():
            echo(line)
        if scoring := local.weights(plan):
            echo(f"released weights: this command {scoring}")
        echo(plan.eta(plan.unfinished) + plan.power)
        return 0
    if plan.power:  # before training: what these seeds can decide (the report gives each claim's MDE after)
        echo(plan.power.removeprefix("; "))
    if scoring := local.weights(plan):  # before the downloads and the hours
        echo(f"released weights: this command {scoring}")
    if job is not None:
        return jobs.submit(plan, job, args.launcher, args.max_parallel, args.name, slurm)
    if not args.retrain_checkpoint and plan.runs and not plan.unfinished:
        echo(
            f"all {len(plan.runs)} run(s) already finished under {root}/: nothing to train (`repro report "
            f"{args.name}` reports them; `--results DIR` trains them afresh into DIR)"
        )
        return 0
    hands = {k: getattr(args, k) for k in ("devices", "num_nodes", "no_wandb", "retrain_checkpoint")}
    return local.train(plan, world, echo, **hands)


SLURM_OPTIONS = ("partition", "gpus_per_node", "cpus_per_task", "time", "mem", "slurm_arg")


def _check(args, launched_by: str | None) -> None:
    """One-line errors for options that do not fit together (before anything is written); ``launched_by``:
    what started this process as a rank of a run (torchrun, srun), if anything."""
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
    if args.full_eval and args.max_steps is None:
        raise UserError("--full-eval: allowed only with --max-steps (an uncapped run scores every target anyway)")
    if args.retrain_checkpoint and (args.launcher or args.max_steps is not None or args.devices * args.num_nodes > 1):
        raise UserError(
            "--retrain-checkpoint: retrains here, in one process, the runs as stored; allowed without "
            "--launcher, --max-steps, --devices and --num-nodes"
        )
    if args.launcher and launched_by:
        raise UserError(
            f"--launcher {args.launcher}: this process is one of those {launched_by} started; submit from a plain shell"
        )


def _job(args, root: Path) -> launch.LaunchedRun:
    """The description of the job that trains a run of this command's selection, less the run's id (the
    session gives each job its own)."""
    return launch.LaunchedRun(
        ref=str(Path(args.name).resolve()) if Path(args.name).is_file() else args.name,
        overrides=tuple(override_args(args)),
        scale=args.scale,
        seeds=args.seeds,
        run_id="",
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


def _slurm(args) -> launch.Slurm | None:
    """The sbatch options of ``--launcher slurm`` (None: another launcher, or none)."""
    if args.launcher != "slurm":
        return None
    return launch.Slurm(
        args.partition,
        args.num_nodes,
        args.devices,
        args.gpus_per_node,
        args.cpus_per_task,
        args.time,
        args.mem,
        launch.slurm_args(args.slurm_arg),
    )


def add_arguments(p, parents) -> None:
    """``repro run``'s options (its parser's ``interrupted``: what Ctrl-C leaves)."""
    p.set_defaults(interrupted=RUN_INTERRUPTED)
    opts.manifest_args(p)
    opts.only_arg(p)
    p.add_argument(
        "--max-steps",
        type=opts.positive("steps"),
        default=None,
        metavar="N",
        help="cap every run at N steps (a different run id: kept out of the manifest's report, reported by "
        "`repro report NAME --max-steps N`); a capped run scores each "
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
