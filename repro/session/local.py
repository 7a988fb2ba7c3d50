"""A plan trained here: its runs one after another, in this process (or in the ranks torchrun or srun
started, ``world``), with a line each as it starts (its place, the time so far, the ETA of what is left)
and as it ends (its scores, beside the shipped run's bits when it was trained now)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from repro import data, progress
from repro.claims import registration
from repro.config import manifest as manifests
from repro.config.metrics import split_gap
from repro.errors import StoreError, UserError
from repro.files import atomic
from repro.plan.runs import Plan, Planned
from repro.progress import say
from repro.replay import checkpoint, samebits
from repro.store import digests
from repro.store import runs as store
from repro.store.runs import CorruptFile, RunDir
from repro.track.loggers import resolve_mode, wandb_dir
from repro.train import distributed, runner, throughput


def start(world: distributed.World | None, plan: Plan, prepare: Callable[[], None]) -> Callable[[str], None]:
    """``prepare`` done (rank 0's alone, the other ranks wait for it) and the ranks joined; what prints a line
    (a follower rank prints nothing)."""
    if world is None:
        prepare()
    else:
        for p in plan.runs:
            runner.check_processes(p.spec, p.manifest, world)
        distributed.start(world)
        distributed.first(world, prepare)
    return say if world is None or world.leads else _quiet


def weights(plan: Plan) -> str:
    """What scoring the released weights of the plan's unfinished runs does, a verb phrase (the downloads,
    the hours, the quick look: :func:`repro.pretrained.cost.note`); "" when none scores any."""
    from repro.pretrained import cost

    return cost.note([p.spec for p in plan.unfinished])


def ensure_data(plan: Plan) -> None:
    """Each dataset the plan's runs read, prepared (once each) where it can be; one that must be prepared
    first, for released weights, says too what the run does after (the downloads and the hours)."""
    for name, options in {(p.spec.data.name, tuple(sorted(p.spec.data.options().items()))): 0 for p in plan.runs}:
        try:
            data.ensure(name, say, **dict(options))
        except data.DatasetMissing as err:
            then = weights(plan)
            if not then:
                raise
            raise data.DatasetMissing(f"{err}; then this command {then}") from None


def train(
    plan: Plan,
    world: distributed.World,
    echo: Callable[[str], None],
    *,
    devices: int = 1,
    num_nodes: int = 1,
    no_wandb: bool = False,
    retrain_checkpoint: bool = False,
) -> int:
    """Train the plan's runs one after another into its root (``retrain_checkpoint``: each stored run's
    checkpoint trained again): the exit status of ``repro run``."""
    root, runs = plan.root, plan.runs
    known = manifests.discover()
    mode = resolve_mode(no_wandb)
    if mode != "disabled" and world.leads:  # before any run is written: W&B's folder
        atomic.make_dirs(wandb_dir(root))
    if mode != "disabled" and not retrain_checkpoint:  # say where: the Quick start wrote them unannounced
        upload = "`repro sync` uploads them" if mode == "offline" else "sent to W&B as they train"
        echo(
            f"W&B {mode}: runs logged under {wandb_dir(root)}/ ({upload}; --no-wandb or WANDB_MODE=disabled "
            "turns W&B off)"
        )
    # a resumed run's instruction set first (docs/reproducibility.md)
    runner.settle_isa((p.spec.run_id, p.state) for p in runs)
    failed = busy = 0
    started = time.monotonic()
    for i, p in enumerate(runs, 1):
        m, spec = p.manifest, p.spec
        plan.timings.refresh()  # the runs this session finished time the ones left of their shape
        todo = [q for q in runs[i - 1 :] if _to_train(q, root, retrain_checkpoint)]
        echo(
            f"[{i}/{len(runs)}] elapsed {progress.duration(time.monotonic() - started)}, {plan.eta(todo)}"
            f"\n  {m.name} {spec.cell_name + ' ' if spec.cell else ''}({spec.run_id}, scale {spec.scale}, "
            f"data {spec.data.label})"
        )
        try:
            if spec.train.weights is not None:  # the authors' weights: scored, not trained (repro.pretrained)
                outcome = _score(p, root, echo, devices * num_nodes)
            elif retrain_checkpoint:
                outcome = checkpoint.checkpoint(spec, m, root, echo=echo)
            else:
                outcome = runner.run_spec(
                    spec,
                    m,
                    root,
                    devices=devices,
                    num_nodes=num_nodes,
                    wandb_mode=mode,
                    echo=echo,
                    eval_targets=plan.caps.get(spec.run_id),
                )
        except BaseException:  # the failure in flight is the one to tell (a full disk fails this write too)
            with contextlib.suppress(StoreError):
                _remember(root, p, known, world)
            raise
        _remember(root, p, known, world)
        if outcome.status == "finished" and world.leads and not retrain_checkpoint:  # a retrained checkpoint
            # leaves the summary as it was; a run trained now: what it executed and the designs it was trained for
            run = RunDir(root, m.name, spec.run_id)
            with contextlib.suppress(StoreError):  # a full disk: its commit still says what it ran
                digests.stamp(run, outcome.summary)
            with contextlib.suppress(StoreError):  # the design's hash (repro.claims.registration)
                registration.stamp(run, m.path, spec.scale)
        if outcome.status in ("failed", "busy"):
            failed += outcome.status == "failed"
            busy += outcome.status == "busy"
            continue
        for line in _ended(p, outcome, root, retrain_checkpoint):
            echo(line)
    return 1 if failed else 3 if busy else 0


def _ended(p: Planned, outcome: runner.Outcome, root: Path, retrain_checkpoint: bool) -> list[str]:
    """The lines of a run that ended stored: its scores, a note on its splits and MFU, and, trained now,
    its bits beside the shipped run's."""
    s, spec = outcome.summary, p.spec
    scores = " / ".join(f"{split} {s[f'{split}_bits']:.4f}" for split in spec.eval.splits if f"{split}_bits" in s)
    prefix = f" (each split's first {s['eval_targets_cap']:,} targets)" if s.get("eval_targets_cap") else ""
    lines = [
        f"  {outcome.status}: {scores or 'no split scored'} bits per {s.get('dataset_unit', 'symbol')} "
        f"on {s.get('dataset')}{prefix}"
    ]
    if gap := split_gap(s.get("valid_bits"), s.get("test_bits")):
        lines.append(f"  note: {gap}")
    if (s.get("mfu") or 0) > 1:
        lines.append(f"  mfu {s['mfu']:.3f}: {throughput.ABOVE_PEAK}")
    if outcome.status == "finished" and not retrain_checkpoint and (line := _beside(p, s, root)):  # trained now
        lines.append(line)
    return lines


def _beside(p: Planned, mine: dict, root: Path) -> str | None:
    """The line of a run just trained into ``root`` (``mine``: its summary as its finish wrote it) beside the
    run of its id that the shipped store holds (:attr:`Planned.shipped`, read when the plan was made): the
    same bits, or how they differ and why (:mod:`repro.replay.samebits`). None when there is none, or this
    run's spec does not read back."""
    shipped = p.shipped
    if shipped is None:
        return None
    off = samebits.differences(shipped.summary, mine)
    if not off:
        same = ", ".join(f"{k} {v:.6f}" for k, v in samebits.scores(shipped.summary).items())
        return f"  the same bits as the run of this id stored under {shipped.path} ({same})"
    why = samebits.reasons(shipped.spec, shipped.summary, mine.get("environment"))
    if why:
        text = "; ".join(why)
    else:
        try:  # the code this run was trained at, as its spec records it
            version = str(RunDir(root, p.manifest.name, p.spec.run_id).spec().get("code_version"))
        except (CorruptFile, OSError):
            return None
        text = samebits.unexplained(shipped.spec, shipped.summary, version)
    return (
        f"  not the bits of the run of this id stored under {shipped.path}: {samebits.shown(off)}; {text} "
        "(docs/reproducibility.md)"
    )


def _score(p: Planned, root: Path, echo: Callable[[str], None], processes: int) -> runner.Outcome:
    """A run of pretrained weights, scored in this one process."""
    from repro.pretrained import imported

    if processes > 1:
        raise UserError(
            f"run {p.spec.run_id} scores pretrained weights in one process; allowed: --devices 1 --num-nodes 1"
        )
    return imported.score(p.spec, p.manifest, root, echo)


def _to_train(p: Planned, root: Path, retrain_checkpoint: bool) -> bool:
    """Whether a run trains in this session: unfinished when planned, or (``--retrain-checkpoint``) without
    a checkpoint."""
    return not p.state.finished or (
        retrain_checkpoint and RunDir(root, p.manifest.name, p.spec.run_id).last_checkpoint is None
    )


def _remember(root: Path, p: Planned, known: dict[str, Path], world: distributed.World) -> None:
    """Once a run is stored (bad data writes nothing), record its manifest where discovery does not find it
    (or it has overrides), so that its name works later; rank 0 alone."""
    m = p.manifest
    if not (world.leads and RunDir(root, m.name, p.spec.run_id).path.exists()):
        return
    if m.args or m.name not in known or known[m.name].resolve() != m.path.resolve():
        store.record_source(root, m.name, m.path, m.args)


def _quiet(line: str) -> None:
    """A follower rank's lines: rank 0 says everything."""
