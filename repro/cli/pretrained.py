"""``repro import official FILE``: an official adaptive-span checkpoint imported into the suite's model,
scored by the official protocol and by the suite's own on the suite's data, and stored as a run.

The run's spec is the checkpoint's configuration: the shapes its tensors fix, the flags of the released
script named by ``--like`` for what they do not (the ramp, the block, dropout, lambda; the dataset), the
file by its sha256, then the ``KEY=VALUE`` overrides (a file corpus: ``data.name=file data.path=P
data.kind=text8``). The released models themselves are a scale of the tables: ``repro run as-table1
--scale pretrained`` downloads, imports and scores them (docs/pretrained.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.cli import options
from repro.cli.common import store_root
from repro.config import overrides
from repro.config.manifest import Manifest, set_key
from repro.data.fetch import digest_file
from repro.pretrained.released import RELEASED
from repro.progress import say
from repro.registry import Command

SCALE = "pretrained"


def config(file: Path, like: str, items: list[str], limit: int | None) -> dict[str, Any]:
    """The import's resolved sections: the checkpoint's shapes and file, ``like``'s flags, the overrides."""
    from repro.pretrained import checkpoint, mapping, released

    ckpt = checkpoint.read(file)
    r = released.released(like)
    data: dict[str, Any] = {"name": r.dataset, "block": r.block, **({"vocab": r.vocab} if r.vocab else {})}
    section = mapping.model_section(ckpt, ramp=r.ramp, dropout=r.dropout, loss_coef=r.loss_coef, init=0.0)
    out = {
        "data": data,
        "model": section,
        "train": {**r.recipe(), "weights": {"source": "official", "sha256": ckpt.sha256}},
        "eval": {"batch_size": 8, **({"prefix": limit} if limit else {})},
    }
    for key, value in overrides.parse(items, multirun=False)[0].items():
        set_key(out, key, value)
    corpus = out["data"]
    if corpus.get("name") == "file" and corpus.get("path"):
        path = Path(corpus["path"]).expanduser().resolve()
        corpus.update(path=str(path), sha256=digest_file(path) if path.is_file() else None)
    return out


def cmd_import(args) -> int:
    from repro.config.spec import build_run
    from repro.pretrained import imported
    from repro.train import signals

    signals.install()  # SIGTERM, SIGINT, SIGHUP: the run marked interrupted, exit 143, 130, 129

    file = Path(args.file).expanduser()
    sections = config(file, args.like, args.overrides, args.limit_bytes)
    spec = build_run(args.manifest, SCALE, {}, sections)
    manifest = Manifest(args.manifest, f"official checkpoint {file.name}", "adaptive_span", file, sections)
    root = store_root(args)
    say(f"importing {file} as run {spec.run_id} of {args.manifest} (scale {SCALE}, data {spec.data.label})")
    outcome = imported.score(spec, manifest, root, say, weights=file.resolve())
    s = outcome.summary
    prefix = f" (the first {spec.eval.prefix:,} tokens of each split only)" if spec.eval.prefix else ""
    for split in spec.eval.splits:
        if f"{split}_bits" in s:
            say(
                f"{split}: {s[f'{split}_bits']:.6f} bits (official protocol), {s[f'{split}_bits_suite']:.6f} "
                f"(the suite's){prefix}"
            )
    say(f"{outcome.status}: {root}/runs/{args.manifest}/{spec.run_id}")
    return 0


def add_arguments(p, parents) -> None:
    p.add_argument("source", choices=["official"], help="whose checkpoint: the official adaptive-span code's")
    p.add_argument("file", metavar="FILE", help="the checkpoint (.pt) its main.py saved")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="set a dotted key of the run's spec (a file corpus: data.name=file data.path=P data.kind=text8)",
    )
    p.add_argument(
        "--like",
        choices=list(RELEASED),
        default="text8",
        help="the released script whose flags fill what the tensors do not say: dataset, block, ramp, dropout, "
        "lambda (default text8)",
    )
    p.add_argument("--manifest", default="official-import", help="the store folder the run goes under")
    p.add_argument(
        "--limit-bytes",
        type=options.positive("tokens"),
        default=None,
        metavar="N",
        help="score only each split's first N tokens (bytes, characters): a quick look, a run of its own",
    )


COMMAND = Command(
    "import",
    "import an official adaptive-span checkpoint into the suite's model and score it on the suite's data by "
    "the official protocol and the suite's own, stored as a run (`repro run as-table1 --scale pretrained` "
    "does it for the released models)",
    add_arguments,
    cmd_import,
)
