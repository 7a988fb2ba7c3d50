"""A plan handed to a launcher (:mod:`repro.train.launch`: local processes or a SLURM job array), one job
per unfinished run, each described by a :class:`~repro.train.launch.LaunchedRun`; and the job executor, what each
job runs: its description made into the plan of its one run (:func:`repro.plan.runs.make`, as the parent
made its own) and trained here (:mod:`repro.session.local`), as a ``repro`` process of its own
(:mod:`repro.session.exits`: its exit status and the one line it printed when it failed go back to the
parent)."""

from __future__ import annotations

from dataclasses import replace

from repro.config import lookup
from repro.errors import UserError
from repro.plan.runs import Plan, make
from repro.plan.selection import stored
from repro.progress import say
from repro.session import exits, local
from repro.train import distributed, launch, quiet, signals


def submit(
    plan: Plan,
    job: launch.LaunchedRun,
    launcher: str,
    parallel: int | None,
    name: str,
    slurm: launch.Slurm | None,
) -> int:
    """Hand each unfinished run of ``plan`` to ``launcher`` as a job of its own (``job``: the description
    they share, which each gets with its run id; ``name``: what the command line selected, which names a
    SLURM job array; ``slurm``: its sbatch options); a local sweep says, as each job ends, how many ended
    and the ETA of the rest."""
    todo = plan.unfinished

    def left(run_ids: list[str], elapsed: dict[str, float]) -> str:  # the ETA of what is not done yet
        plan.timings.refresh()  # the runs the jobs finished time the ones left of their shape
        return plan.eta([p for p in todo if p.spec.run_id in run_ids], parallel or 1, elapsed)

    if todo:
        say(left([p.spec.run_id for p in todo], {}))
    if len(todo) < len(plan.runs):
        say(f"{len(plan.runs) - len(todo)} of {len(plan.runs)} run(s) already finished: not submitted")
    if not todo:
        return 0
    jobs = [(p.manifest.name, replace(job, run_id=p.spec.run_id)) for p in todo]
    if launcher == "local":
        return launch.run_local(plan.root, jobs, parallel or 1, say, run_job, left)
    return launch.submit_slurm(name, plan.root, jobs, slurm, parallel, say, run_job)


def run_job(job: launch.LaunchedRun) -> launch.Ended:
    """What a launched job runs: :func:`execute` as a ``repro`` process, with its exit status and the one
    line it printed when it failed."""
    told: list[str] = []
    code = exits.command(lambda: execute(job), told, exits.RUN_INTERRUPTED)
    return launch.Ended(code, told[-1].removeprefix("error: ") if told else None)


def execute(job: launch.LaunchedRun) -> int:
    """The one run a job's description names, resolved as ``repro run`` resolved it and trained here (each
    task of a SLURM job executes it: the ranks of one run)."""
    signals.install()
    quiet.configure(job.verbose)
    world = distributed.world(job.devices, job.num_nodes)
    overrides = list(job.overrides)
    found = lookup.with_parts(lookup.select(job.ref, overrides, stored(job.results), job.access), overrides)
    plan = make(
        [m for m in found if job.scale in m.scale_names()],
        job.results,
        job.scale,
        seeds=job.seeds,
        only=job.only,
        max_steps=job.max_steps,
        run_id=job.run_id,
        full_eval=job.full_eval,
        echo=_unsaid,
    )
    if not plan.runs:
        raise UserError(
            f"job of run {job.run_id}: no run of {job.ref} at scale {job.scale} has this id any more (its "
            "manifest changed after it was submitted); submit it again"
        )
    echo = local.start(world, plan, lambda: local.ensure_data(plan))
    return local.train(plan, world, echo, devices=job.devices, num_nodes=job.num_nodes, no_wandb=job.no_wandb)


def _unsaid(line: str) -> None:
    """A job's notes on its selection: its parent printed them when it planned."""
