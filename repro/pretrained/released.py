"""The four models the official adaptive-span code released: where they are, how they were trained, what
the paper and the official README say they score, and their download.

``get_pretrained.sh`` fetches ``enwik8.pt``, ``text8.pt``, ``enwik8_large.pt`` and ``text8_large.pt`` from
:data:`URL_ROOT`; ``experiments/<name>.sh`` trained each (the flags below: what the tensors' shapes do not
say) and evaluates it with ``--full-eval-mode --batch-sz 8``. No hash is published: the first download
records each file's size and sha256 beside it (``<data root>/downloads/adaptive-span/recorded.json``) and
every later one is checked against that record, so a file that changed on the server, or a corrupt copy,
is refused rather than scored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from repro.data.errors import DataError
from repro.data.fetch import Pin, digest_file, download
from repro.data.on_disk import data_root
from repro.files import atomic

URL_ROOT = "https://dl.fbaipublicfiles.com/adaptive-span"
URL_ROOT_ENV = "REPRO_ADAPTIVE_SPAN_URL"  # another root (a mirror; the tests' local server)
FOLDER = "adaptive-span"  # under the data root's downloads/
RECORD = "recorded.json"


@dataclass(frozen=True)
class Released:
    """One released checkpoint and the flags of ``experiments/<name>.sh``, which trained it (its shapes are
    in the file: :mod:`repro.pretrained.checkpoint`)."""

    name: str
    dataset: str  # the suite's dataset (its splits are the official ones: repro.pretrained.symbols)
    vocab: str | None  # the suite's data.vocab for it
    dropout: float
    valid: float  # the paper's and the official README's dev bits (the same numbers)
    test: float
    steps: int  # --niter x --nbatches (1000), the fine-tuning launch's included
    final_phase: int = 0  # the large models' last 20k steps at lr / 10 (their fine-tuning launch)
    ramp: int = 32  # --adapt-span-ramp: the scripts keep the default
    block: int = 512
    loss_coef: float = 5e-7  # --adapt-span-loss
    cost: float = 1.0  # seconds per token scored, relative to the 38M shape's (repro.pretrained.cost)

    @property
    def url(self) -> str:
        return f"{url_root()}/{self.name}.pt"

    def recipe(self) -> dict:
        """The script's training flags as the suite's ``train`` section (Adagrad with the per-tensor clip)."""
        return {
            "optimizer": "adagrad",
            "lr": 0.07,
            "warmup": 32000,
            "clip": 0.03,
            "clip_mode": "per_tensor",
            "batch_size": 64,
            "steps": self.steps,
            "final_phase": self.final_phase,
        }


RELEASED: dict[str, Released] = {
    r.name: r
    for r in (
        Released("enwik8", "enwik8", "as205", 0.3, 1.04, 1.02, 600_000),
        Released("enwik8_large", "enwik8", "as205", 0.4, 1.00, 0.98, 170_000, 20_000, cost=5.0),
        Released("text8", "text8", None, 0.3, 1.05, 1.11, 900_000),
        Released("text8_large", "text8", None, 0.4, 1.01, 1.07, 270_000, 20_000, cost=5.0),
    )
}


def url_root() -> str:
    """Where the checkpoints are downloaded from: ``$REPRO_ADAPTIVE_SPAN_URL`` or the official root."""
    return os.environ.get(URL_ROOT_ENV) or URL_ROOT


def released(name: str) -> Released:
    if name not in RELEASED:
        raise DataError(f"train.weights.name: got {name!r}; allowed: one of {', '.join(RELEASED)}")
    return RELEASED[name]


def published(name: str, split: str) -> float:
    """The bits the paper and the official README give checkpoint ``name`` on ``split`` (valid: their dev)."""
    r = released(name)
    return r.valid if split == "valid" else r.test


def folder(root=None) -> Path:
    return data_root(root) / "downloads" / FOLDER


def recorded(root=None) -> dict[str, dict]:
    """The size and sha256 each file had when first downloaded here (name -> {size, sha256, url})."""
    path = folder(root) / RECORD
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise DataError(f"{path}: unreadable ({err}); delete it to record the downloads' hashes afresh") from None
    return record if isinstance(record, dict) else {}


def fetch(name: str, echo, root=None) -> Path:
    """The checkpoint ``name``, downloaded (resumably) unless it is here, checked against the hash recorded
    when it was first downloaded; that first download records it (and says so) once it is whole: the size
    the server stated, and a checkpoint the suite reads (:func:`repro.pretrained.checkpoint.read`). A file
    under the final name with no hash recorded is refused, never recorded (it may be half a download)."""
    r = released(name)
    dest = folder(root) / f"{name}.pt"
    pins = recorded(root)
    known = pins.get(name)
    if known is not None:
        return download(r.url, dest, Pin(int(known["size"]), str(known["sha256"])))

    def record(part: Path) -> None:
        from repro.pretrained import checkpoint

        try:
            checkpoint.read(part)
        except checkpoint.ImportRefused as err:
            raise DataError(f"download of {r.url} is no checkpoint the suite reads ({err}); deleted") from None
        digest = digest_file(part)
        pins[name] = {"size": part.stat().st_size, "sha256": digest, "url": r.url}
        atomic.write_text(folder(root) / RECORD, json.dumps(pins, indent=2, sort_keys=True) + "\n")
        echo(
            f"  {dest.name}: sha256 {digest} recorded on this first download (the authors publish no hash); "
            "later downloads are checked against it"
        )

    if not (dest.exists() or dest.is_symlink()):
        echo(f"  downloading {r.url} (resumable: an interrupted download continues where it stopped)")
    return download(r.url, dest, None, complete=record)
