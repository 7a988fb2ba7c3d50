"""What the tests of ``repro retrain`` and ``repro verify`` share: git in a temporary repository, the
environment of a ``repro`` process running a given checkout's code, and a commit whose training waits at
a step for a signal, with the means to watch the processes and worktrees a signal leaves."""

from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def env(code: Path) -> dict[str, str]:
    """The environment of a ``repro`` process running the code of ``code``, W&B off, no results root set."""
    out = {**os.environ, "PYTHONPATH": str(code), "WANDB_MODE": "disabled"}
    out.pop("REPRO_RESULTS", None)
    return out


def commit(repo: Path, message: str) -> str:
    """Commit every tracked change of ``repo``; the new commit's short hash."""
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qam", message], check=True)
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def until(condition, what: str, seconds: float = 180):
    """``condition()``'s first true value, asked every 10 ms until the deadline (then the test fails)."""
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, f"no {what} after {seconds} s"
        time.sleep(0.01)
    return found


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie no longer does)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def worktrees(repo: Path) -> list[Path]:
    """The worktrees ``repo`` has registered, itself first."""
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True, text=True)
    return [Path(line.split(" ", 1)[1]) for line in listed.stdout.splitlines() if line.startswith("worktree ")]


def gated_commit(repo: Path, ready: Path) -> str:
    """A commit whose training, the first time it reaches step 12 (after step 10's checkpoint), writes its
    pid to ``ready`` and waits there until it is signalled (SIGTERM, or the parent's death kills it)."""
    module = repo / "repro" / "train" / "module.py"
    module.write_text(
        module.read_text()
        + textwrap.dedent(f"""

        _plain_step = LMModule.training_step


        def _gated_step(self, batch, batch_idx):
            import os, time
            from repro.train import signals
            if self.global_step == 12 and not os.path.exists("{ready}"):
                with open("{ready}.tmp", "w") as f:
                    f.write(str(os.getpid()))
                os.rename("{ready}.tmp", "{ready}")
                deadline = time.monotonic() + 300
                while signals.requested() is None and time.monotonic() < deadline:
                    time.sleep(0.01)
            return _plain_step(self, batch, batch_idx)


        LMModule.training_step = _gated_step
        """)
    )
    return commit(repo, "training that waits at step 12 for a signal")
