"""The processes that train one run: this one alone, or ranks that torchrun or srun started.

Alone (no launcher around us) this process is the run's only writer; ``--devices G`` > 1 spawns G
workers inside the fit (Lightning's ``ddp_spawn``) and gets the trained weights back. Launched
(``torchrun``: Lightning's TorchElasticEnvironment; ``srun`` with more than one task: its
SLURMEnvironment) every rank runs ``repro run`` itself and trains with Lightning's ``ddp``; the number
of processes launched must be ``--devices`` per node times ``--num-nodes``. Rank 0 decides (skip,
resume from which checkpoint), holds the run's lock, writes the store and evaluates; the other ranks
*follow* what it tells them and never write the store. Rank 0's word, and the checkpoint's per-rank
state, travel over a gloo group whose timeout covers rank 0's final evaluation (:data:`WAIT`).
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.fabric.plugins.environments import (
    ClusterEnvironment,
    LightningEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)

from repro.errors import UserError

WAIT = timedelta(hours=24)  # how long followers wait for rank 0 (between runs: its evaluation)
_group: Any = None  # the gloo group rank 0's word and the checkpoint state travel on


@dataclass(frozen=True)
class World:
    devices: int  # processes per node
    nodes: int
    rank: int  # this process's global rank (0 when alone: spawned workers are not ours)
    environment: ClusterEnvironment  # how Lightning finds the ranks
    launched: bool  # torchrun or srun started the ranks

    @property
    def processes(self) -> int:
        return self.devices * self.nodes

    @property
    def leads(self) -> bool:
        return self.rank == 0

    @property
    def strategy(self) -> str:
        if self.processes == 1:
            return "auto"
        return "ddp" if self.launched else "ddp_spawn"


def world(devices: int, num_nodes: int) -> World:
    """The run's processes as the command line and the launcher say (one-line UserError where they differ)."""
    processes = devices * num_nodes
    launcher = _launcher()
    if launcher is None:
        if num_nodes > 1:
            raise UserError(
                f"--num-nodes {num_nodes}: a multi-node run is started on every node by torchrun or srun "
                "(or submitted with --launcher slurm); allowed without one: 1"
            )
        return World(devices, num_nodes, 0, LightningEnvironment(), launched=False)
    name, environment, per_node = launcher
    started = environment.world_size()
    if (started, per_node) != (processes, devices):
        raise UserError(
            f"--devices {devices} --num-nodes {num_nodes}: {name} started {started} process(es), {per_node} per "
            f"node; allowed: --devices {per_node} --num-nodes {max(1, started // max(1, per_node))}"
        )
    return World(devices, num_nodes, environment.global_rank(), environment, launched=True)


def launched_by() -> str | None:
    """``torchrun`` or ``srun`` when one of them started this process (as one of several ranks)."""
    found = _launcher()
    return found[0] if found else None


def _launcher() -> tuple[str, ClusterEnvironment, int] | None:
    """(name, Lightning's environment, processes per node) when torchrun or srun started this process."""
    if TorchElasticEnvironment.detect():
        return "torchrun", TorchElasticEnvironment(), int(os.environ["LOCAL_WORLD_SIZE"])
    tasks = os.environ.get("SLURM_NTASKS")
    if tasks and int(tasks) > 1 and os.environ.get("SLURM_JOB_NAME") not in ("bash", "interactive"):
        try:
            environment = SLURMEnvironment(auto_requeue=False)  # requeueing is the launcher's (repro.train.launch)
        except RuntimeError as err:  # --ntasks without --ntasks-per-node
            raise UserError(f"srun: {err}") from None
        return "srun", environment, int(os.environ["SLURM_NTASKS_PER_NODE"])
    return None


def start(world: World) -> None:
    """Join the launched ranks' process group (Lightning's fit then uses it), and the gloo group."""
    global _group
    if not world.launched or world.processes == 1 or dist.is_initialized():
        return
    os.environ["MASTER_ADDR"] = world.environment.main_address
    os.environ["MASTER_PORT"] = str(world.environment.main_port)
    backend = "nccl" if torch.cuda.is_available() else "gloo"  # Lightning's choice for the device
    dist.init_process_group(backend, rank=world.rank, world_size=world.processes, timeout=default_pg_timeout)
    _group = dist.new_group(backend="gloo", timeout=WAIT)


def _gloo():
    """The gloo group (made on first use inside a ``ddp_spawn`` worker: every rank comes here together)."""
    global _group
    if _group is None:
        _group = dist.new_group(backend="gloo", timeout=WAIT)
    return _group


def _together() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def gather(obj: Any) -> list[Any] | None:
    """Every rank's ``obj``, in rank order, on rank 0 (None on the others); ``[obj]`` alone."""
    if not _together():
        return [obj]
    out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0, group=_gloo())
    return out


def _broadcast(obj: Any) -> Any:
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=_gloo())
    return box[0]


@contextlib.contextmanager
def leading(world: World) -> Iterator[Callable[[Any], None]]:
    """Rank 0: ``tell(word)`` once, for the followers' :func:`follow`; an exception raised in the block
    before that is told instead (the followers raise it too), so no rank waits for a word never sent."""
    told = [False]

    def tell(word: Any) -> None:
        told[0] = True
        if world.launched and world.processes > 1:
            _broadcast(word)

    try:
        yield tell
    except BaseException as err:
        if not told[0]:
            tell(_Raised(err))
        raise


def first(world: World, work: Callable[[], Any]) -> None:
    """``work()`` on rank 0 only; the other ranks wait for it to end (and raise what it raised)."""
    if world.leads:
        with leading(world) as tell:
            work()
            tell(None)
    else:
        follow(world)


def follow(world: World) -> Any:
    """A follower: rank 0's word, or rank 0's exception raised here."""
    word = _broadcast(None)
    if isinstance(word, _Raised):
        raise word.error
    return word


class _Raised:
    """An exception rank 0 raised before it could tell its word."""

    def __init__(self, error: BaseException):
        try:  # what cannot be pickled travels as its message
            pickle.dumps(error)
            self.error = error
        except Exception:
            self.error = RuntimeError(f"rank 0: {type(error).__name__}: {error}")
