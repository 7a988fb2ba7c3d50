"""``repro sync``: upload the offline W&B runs of a results root with the W&B CLI (``wandb sync``).

Runs live under ``<results>/wandb/`` (stores written before that keep theirs in each run's folder:
``runs/<manifest>/<run_id>/wandb/``). A run already uploaded carries W&B's own marker
(``run-<id>.wandb.synced``) and is skipped. ``WANDB_BASE_URL`` selects a self-hosted server.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repro.errors import UserError
from repro.track.loggers import has_credentials, wandb_dir, wandb_host


@dataclass
class Synced:
    synced: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    failed: list[Path] = field(default_factory=list)


def offline_runs(root: Path) -> list[Path]:
    return sorted([*wandb_dir(root).glob("offline-run-*"), *root.glob("runs/*/*/wandb/offline-run-*")])


def is_synced(run: Path) -> bool:
    logs = list(run.glob("*.wandb"))
    return bool(logs) and all(log.with_suffix(".wandb.synced").exists() for log in logs)


def wandb_command() -> str:
    """The ``wandb`` executable: the one on PATH, else the one installed beside this interpreter."""
    found = shutil.which("wandb") or shutil.which("wandb", path=str(Path(sys.executable).parent))
    if found is None:
        raise UserError("the `wandb` command is not on PATH; install wandb")
    return found


def sync(
    root: Path, entity: str | None = None, project: str | None = None, echo: Callable[[str], None] = print
) -> Synced:
    """Upload every offline run not uploaded yet; prints one line per run."""
    done = Synced()
    pending = []
    for run in offline_runs(root):
        (done.skipped if is_synced(run) else pending).append(run)
    for run in done.skipped:
        echo(f"  skipped {run} (already synced)")
    if not pending:
        return done
    if not has_credentials():
        raise UserError(
            f"{len(pending)} offline W&B run(s) wait under {root}, but no W&B credentials were "
            f"found for {wandb_host()}; run `wandb login` (or set WANDB_API_KEY) and retry"
        )
    command = [
        wandb_command(),
        "sync",
        *(["--entity", entity] if entity else []),
        *(["--project", project] if project else []),
        *map(str, pending),
    ]
    proc = subprocess.run(command)
    for run in pending:
        ok = is_synced(run)
        (done.synced if ok else done.failed).append(run)
        echo(f"  {'synced' if ok else 'FAILED'} {run}")
    if proc.returncode != 0 and not done.failed:
        raise UserError(f"`wandb sync` exited with status {proc.returncode}")
    return done
