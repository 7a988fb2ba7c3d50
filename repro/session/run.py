"""``repro run``'s session, from what was asked to its exit status: the options checked together (before
anything is written), the selection made (:mod:`repro.plan.selection`) and planned (:mod:`repro.plan.runs`:
each run's stored state read once, and the shipped store's run of its id that the run is held beside when
it ends), the plan printed, then its runs trained here one after another (:mod:`repro.session.local`) or
handed to a launcher as jobs (:mod:`repro.session.jobs`). :class:`Request` is what the command line asked,
as plain values: ``repro/cli/run.py`` parses it once and hands it over."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from repro.config import lookup
from repro.config.access import NONE, Access
from repro.errors import UserError
from repro.plan import runs as plans
from repro.plan import selection
from repro.store.runs import results_root
from repro.train import launch, quiet, signals

SLURM_OPTIONS = ("partition", "gpus_per_node", "cpus_per_task", "time", "mem", "slurm_arg")


@dataclass(frozen=True)
class Request:
    """What ``repro run`` was asked, each field an option's value (``overrides``: the override arguments as
    the command line writes them, ``-m`` first when they sweep, ``--limit-bytes``'s ``eval.prefix=N`` among
    them; ``results``: ``--results``, None for ``$REPRO_RESULTS`` or ``results``)."""

    name: str
    scale: str
    overrides: tuple[str, ...] = ()
    access: Access = NONE
    results: str | None = None
    seeds: int | None = None
    only: tuple[str, ...] = ()
    max_steps: int | None = None
    full_eval: bool = False
    run_id: str | None = None
    dry_run: bool = False
    save: str | None = None
    devices: int = 1
    num_nodes: int = 1
    no_wandb: bool = False
    verbose: bool = False
    retrain_checkpoint: bool = False
    launcher: str | None = None  # local | slurm; None: the runs train here, one after another
    max_parallel: int | None = None
    partition: str | None = None  # the SLURM options (SLURM_OPTIONS), allowed with --launcher slurm alone
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    time: int | None = None
    mem: str | None = None
    slurm_arg: tuple[str, ...] = ()


def run(request: Request) -> int:
    """``repro run``: check, select, plan, print, then train here or hand to the launcher; its exit status."""
    from repro.session import jobs, local  # torch and Lightning
    from repro.train import distributed

    signals.install()
    sbatch = check(request, distributed.launched_by())
    quiet.configure(request.verbose)
    world = None if request.launcher else distributed.world(request.devices, request.num_nodes)
    root = results_root(request.results)
    found = selection.select(request.name, list(request.overrides), root, request.access)
    chosen = selection.at_scale(lookup.with_parts(found, list(request.overrides)), request.scale)

    def prepare() -> None:  # rank 0's alone: the other ranks wait for it (and raise what it raised)
        selection.save(found, request.save)
        if not request.dry_run:
            local.ensure_data(plan)

    plan = plans.make(
        chosen,
        root,
        request.scale,
        seeds=request.seeds,
        only=request.only,
        max_steps=request.max_steps,
        run_id=request.run_id,
        full_eval=request.full_eval,
    )
    if request.run_id is not None and not plan.runs:
        raise UserError(f"--run-id {request.run_id}: no run of {request.name} at scale {request.scale} has this id")
    echo = local.start(world, plan, prepare)
    if request.max_steps is not None:
        echo(
            f"--max-steps {request.max_steps}: capped runs have run ids of their own, kept out of the manifest's "
            f"report; `repro report {request.name} --max-steps {request.max_steps}` reports them, labelled capped; "
            f"they {'score every target (--full-eval)' if request.full_eval else plan.scored}"
        )
    if request.dry_run:
        for line in plan.table():
            echo(line)
    elif plan.power:  # before training: what these seeds can decide (the report gives each claim's MDE after)
        echo(plan.power.removeprefix("; "))
    if scoring := local.weights(plan):  # before the downloads and the hours
        echo(f"released weights: this command {scoring}")
    if request.dry_run:
        echo(plan.eta(plan.unfinished) + plan.power)
        return 0
    if request.launcher:
        each = job(request, root)
        return jobs.submit(plan, each, request.launcher, request.max_parallel, request.name, sbatch)
    if not request.retrain_checkpoint and plan.runs and not plan.unfinished:
        echo(
            f"all {len(plan.runs)} run(s) already finished under {root}/: nothing to train (`repro report "
            f"{request.name}` reports them; `--results DIR` trains them afresh into DIR)"
        )
        return 0
    return local.train(
        plan,
        world,
        echo,
        devices=request.devices,
        num_nodes=request.num_nodes,
        no_wandb=request.no_wandb,
        retrain_checkpoint=request.retrain_checkpoint,
    )


def check(request: Request, launched_by: str | None) -> launch.Slurm | None:
    """One-line errors for options that do not fit together (before anything is written); ``launched_by``:
    what started this process as a rank of a run (torchrun, srun), if anything. The sbatch options of
    ``--launcher slurm`` (None: another launcher, or none)."""
    given = [f"--{o.replace('_', '-')}" for o in SLURM_OPTIONS if getattr(request, o) not in (None, ())]
    if request.launcher != "slurm" and given:
        raise UserError(f"{', '.join(given)}: SLURM options; allowed only with --launcher slurm")
    if request.max_parallel is not None and request.launcher is None:
        raise UserError(
            f"--max-parallel {request.max_parallel}: allowed: a positive number, with --launcher local|slurm"
        )
    if request.launcher == "local" and request.num_nodes != 1:
        raise UserError(f"--num-nodes {request.num_nodes}: --launcher local runs on this machine; allowed: 1")
    if request.gpus_per_node not in (None, request.devices):
        raise UserError(
            f"--gpus-per-node {request.gpus_per_node}: each of a node's --devices {request.devices} processes "
            f"trains on one GPU; allowed: {request.devices} (or --devices {request.gpus_per_node})"
        )
    extra = launch.slurm_args(request.slurm_arg)
    if request.launcher:
        try:
            import submitit  # noqa: F401  (an optional extra)
        except ImportError:
            raise UserError(f"--launcher {request.launcher} needs submitit: pip install -e '.[cluster]'") from None
    if request.full_eval and request.max_steps is None:
        raise UserError("--full-eval: allowed only with --max-steps (an uncapped run scores every target anyway)")
    if request.retrain_checkpoint and (
        request.launcher or request.max_steps is not None or request.devices * request.num_nodes > 1
    ):
        raise UserError(
            "--retrain-checkpoint: retrains here, in one process, the runs as stored; allowed without "
            "--launcher, --max-steps, --devices and --num-nodes"
        )
    if request.launcher and launched_by:
        raise UserError(
            f"--launcher {request.launcher}: this process is one of those {launched_by} started; submit from a "
            "plain shell"
        )
    if request.launcher != "slurm":
        return None
    return launch.Slurm(
        request.partition,
        request.num_nodes,
        request.devices,
        request.gpus_per_node,
        request.cpus_per_task,
        request.time,
        request.mem,
        extra,
    )


def job(request: Request, root: Path) -> launch.LaunchedRun:
    """The description of the job that trains a run of this request's selection into ``root``, less the
    run's id (the session gives each job its own)."""
    return launch.LaunchedRun(
        ref=str(Path(request.name).resolve()) if Path(request.name).is_file() else request.name,
        overrides=request.overrides,
        scale=request.scale,
        seeds=request.seeds,
        run_id="",
        results=root.resolve(),
        access=request.access,
        devices=request.devices,
        num_nodes=request.num_nodes,
        max_steps=request.max_steps,
        full_eval=request.full_eval,
        only=request.only,
        no_wandb=request.no_wandb,
        verbose=request.verbose,
    )
