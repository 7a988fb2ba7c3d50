"""Checkpoints: written atomically with the previous one kept, read back as plain data only.

``last.ckpt`` is written through a temp file; the file it replaces becomes ``previous.ckpt``, so a
kill at any moment leaves at least one complete checkpoint. Reading checks the zip archive and its
CRCs, then unpickles with torch's weights-only unpickler (tensors and plain containers: a crafted
pickle cannot run code). A truncated, empty, garbled or bit-flipped file is *corrupt* (the run falls
back to the previous checkpoint); a sound archive that holds other objects is *refused*, and so is a
checkpoint of another run (each records its run's id: a file copied from another seed's run would
resume as this one and store that run's bits under this id).
"""

from __future__ import annotations

import pickle
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.checkpoint_io import CheckpointIO

from repro.errors import UserError
from repro.files import atomic

LAST, PREVIOUS = "last.ckpt", "previous.ckpt"
RUN_ID = "repro_run_id"  # the id of the run that wrote a checkpoint (absent in those written before it was kept)


class CorruptCheckpoint(Exception):
    """The file is not a complete checkpoint (the message names it and why)."""


class ForeignCheckpoint(UserError):
    """A sound checkpoint that another run wrote: refused, never resumed from."""


class UnsafeCheckpoint(UserError):
    """The file holds pickled objects beyond tensors and plain data: refused, never executed."""


def load(path: Path, mmap: bool = False) -> dict[str, Any]:
    """A checkpoint's contents (tensors on the CPU); CorruptCheckpoint or UnsafeCheckpoint otherwise."""
    try:
        if not zipfile.is_zipfile(path):
            raise CorruptCheckpoint(f"{path}: not a checkpoint (empty, truncated or not a zip archive)")
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as err:
        raise CorruptCheckpoint(f"{path}: unreadable ({err})") from None
    if bad is not None:
        raise CorruptCheckpoint(f"{path}: member {bad} fails its CRC check")
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as err:
        raise UnsafeCheckpoint(
            f"{path}: refused to load: it holds {unsafe_content(err)}, not only tensors and plain data (delete it "
            "to restart the run)"
        ) from None
    except Exception as err:  # a sound zip whose records torch cannot read
        raise CorruptCheckpoint(f"{path}: unreadable ({type(err).__name__}: {str(err)[:200]})") from None


def unsafe_content(err: pickle.UnpicklingError) -> str:
    """What torch's weights-only unpickler refused, in words: ``a reference to os.system`` (the global it
    met), else ``pickled objects``."""
    found = re.search(r"GLOBAL ([\w.]+)", str(err))
    return f"a reference to {found.group(1)}" if found else "pickled objects"


def latest(directory: Path, echo: Callable[[str], None] = print, run_id: str | None = None) -> tuple[Path, int] | None:
    """The checkpoint a run resumes from: :func:`newest`, saying why a file was passed over and, when none
    is left, that the run restarts."""
    found, passed = newest(directory, run_id)
    for why in passed:
        echo(f"  {why}: passed over")
    if found is None and passed:
        echo("  no usable checkpoint: the run restarts from step 0")
    return found


def newest(directory: Path, run_id: str | None = None) -> tuple[tuple[Path, int] | None, list[str]]:
    """The newest good checkpoint in ``directory`` and its step (``last.ckpt``, else ``previous.ckpt``, else
    None), and why each file before it was passed over. Refuses unsafe files, and with ``run_id`` a
    checkpoint another run wrote."""
    passed = []
    for name in (LAST, PREVIOUS):
        path = directory / name
        if not path.exists():
            continue
        try:
            checkpoint = load(path, mmap=True)
            step = int(checkpoint["global_step"])
            owner = checkpoint.get(RUN_ID, run_id)
        except (CorruptCheckpoint, KeyError, TypeError, ValueError, AttributeError) as err:
            passed.append(str(err) if isinstance(err, CorruptCheckpoint) else f"{path}: no global_step")
            continue
        if run_id is not None and owner != run_id:
            raise ForeignCheckpoint(
                f"{path}: a checkpoint of run {owner!r}, not of run {run_id}: refused (delete it to restart the run)"
            )
        return (path, step), passed
    return None, passed


def at_step(directory: Path, step: int, run_id: str | None = None) -> tuple[Path | None, str]:
    """The checkpoint of step ``step`` (a finished run's last one: the weights it scored), else None and
    why not: no checkpoint, or damaged ones passed over and the newest good one of an earlier step."""
    found, passed = newest(directory, run_id)
    if found is not None and found[1] == step:
        return found[0], ""
    if found is not None:
        passed.append(f"{found[0].name} holds step {found[1]}, not step {step}, whose weights the run scored")
    return None, "; ".join(passed) or "no checkpoint"


class StoreCheckpointIO(CheckpointIO):
    """Lightning's checkpoint I/O through :func:`repro.files.atomic.replacing` and :func:`load`."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any = None) -> None:
        path = Path(path)
        with atomic.replacing(path, keep=path.with_name(PREVIOUS) if path.name == LAST else None) as fh:
            torch.save(checkpoint, fh)

    def load_checkpoint(self, path, map_location: Any = None, weights_only: bool | None = None) -> dict[str, Any]:
        try:
            return load(Path(path))
        except CorruptCheckpoint as err:
            raise UserError(str(err)) from None

    def remove_checkpoint(self, path) -> None:
        Path(path).unlink(missing_ok=True)
