"""DDP runs for the tests: a tiny adaptive-span manifest (the recurrent cache is the hard part of an exact
resume) trained by every rank of real torchrun jobs, one torchrun per "node", all on this machine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from faultkit import manifest
from textcorpus import write_corpus

from repro.config import manifest as manifests
from repro.store.runs import RunDir

HERE = Path(__file__).parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


@dataclass(frozen=True)
class Setup:
    path: Path  # the manifest
    name: str
    run_id: str
    env: dict[str, str]  # the ranks' environment
    base: Path

    def run(self, root: Path) -> RunDir:
        return RunDir(root, self.name, self.run_id)

    def with_env(self, **changes: str | None) -> Setup:
        env = {**self.env, **changes}
        return replace(self, env={k: v for k, v in env.items() if v is not None})


def setup(base: Path, steps: int = 20) -> Setup:
    """The manifest (checkpoints every 5 steps, batch of 4 streams) and the ranks' environment."""
    path = base / "m.yaml"
    path.write_text(manifest(write_corpus(base / "corpus.txt"), model="adaptive", steps=steps))
    m = manifests.load(path)
    (spec,) = m.expand("tiny")
    env = {**os.environ, "REPRO_DATA": str(base / "data"), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent), env.get("PYTHONPATH", "")])
    return Setup(path, m.name, spec.run_id, env, base)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(
    setup: Setup, root: Path, argv: list[str], *, nodes: int = 1, per_node: int = 2, entry=("-m", "repro")
) -> tuple[list[int], str]:
    """``repro --results ROOT ARGV`` as every rank of a torchrun job (``entry``: another script, with its
    own arguments first); the torchruns' exit codes and their output."""
    port, procs = free_port(), []
    for node in range(nodes):
        command = [*TORCHRUN, "--nnodes", str(nodes), "--node-rank", str(node), "--nproc-per-node", str(per_node)]
        command += ["--master-addr", "127.0.0.1", "--master-port", str(port), *entry, "--results", str(root), *argv]
        procs.append(subprocess.Popen(command, env=setup.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outs = [p.communicate(timeout=300)[0].decode(errors="replace") for p in procs]
    return [p.returncode for p in procs], "\n".join(outs)


def reference(setup: Setup, root: Path) -> RunDir:
    """The uninterrupted run: one node, two processes (torchrun --nproc-per-node 2)."""
    codes, out = torchrun(setup, root, ["run", str(setup.path), "--devices", "2"])
    assert codes == [0], out[-3000:]
    return setup.run(root)


def same_run(run: RunDir, reference: RunDir, exact_rows: bool = True) -> None:
    """``run`` finished with ``reference``'s numbers (1e-4) and its metric rows (``exact_rows=False``: and
    possibly more, as a run stopped by a signal logs its last step off the ``log_every`` grid)."""
    ours, theirs = run.summary(), reference.summary()
    assert ours["status"] == "finished" and ours["steps"] == theirs["steps"], ours
    for key in ("valid_bits", "test_bits"):
        assert abs(ours[key] - theirs[key]) < 1e-4, (key, ours[key], theirs[key])
    a, b = run.metrics(), reference.metrics()
    assert a["step"].is_unique and (
        list(a["step"]) == list(b["step"]) if exact_rows else set(b["step"]) <= set(a["step"])
    )
    both = b.merge(a, on="step", suffixes=("", "_run"))
    assert (both["train/bits"] - both["train/bits_run"]).abs().max() < 1e-4
