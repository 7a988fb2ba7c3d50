"""``repro run``: its options, and the command line parsed once into the session's request
(:class:`repro.session.run.Request`), which the session checks, selects, plans, prints and executes: a
selection's runs trained here one after another, or handed to a launcher as jobs."""

from __future__ import annotations

from repro.cli import options as opts
from repro.config import overrides
from repro.registry import Command
from repro.session import run as session
from repro.session.exits import RUN_INTERRUPTED
from repro.train import launch


def cmd_run(args) -> int:
    asked = request(args)
    return session.run(asked)


def request(args) -> session.Request:
    """The command line as the session's :class:`~repro.session.run.Request`, parsed once
    (``--limit-bytes N``: the override ``eval.prefix=N``, after the others)."""
    prefix = [] if args.limit_bytes is None else [f"eval.prefix={args.limit_bytes}"]
    return session.Request(
        name=args.name,
        scale=args.scale,
        overrides=tuple(overrides.args_of([*args.overrides, *prefix], args.multirun)),
        access=args.access,
        results=args.results,
        seeds=args.seeds,
        only=tuple(args.only),
        max_steps=args.max_steps,
        full_eval=args.full_eval,
        run_id=args.run_id,
        dry_run=args.dry_run,
        save=args.save,
        devices=args.devices,
        num_nodes=args.num_nodes,
        no_wandb=args.no_wandb,
        verbose=args.verbose,
        retrain_checkpoint=args.retrain_checkpoint,
        launcher=args.launcher,
        max_parallel=args.max_parallel,
        partition=args.partition,
        gpus_per_node=args.gpus_per_node,
        cpus_per_task=args.cpus_per_task,
        time=args.time,
        mem=args.mem,
        slurm_arg=tuple(args.slurm_arg),
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
