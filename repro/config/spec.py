"""Typed run specifications.

A :class:`RunSpec` is one fully resolved training run: its data, model, train and eval sections.
Sections are dataclasses; :func:`build` turns a plain dict (from YAML) into one, checking every key,
type and value range (``BOUNDS``; floats must be finite) and naming the key path in the error;
:func:`check_relations` checks what ties keys together (heads divide the width, contexts fit the
block, the dataset exists and takes the options). The run id is a stable hash of the resolved spec.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repro.config.fields import later, plain
from repro.data import catalog
from repro.data.text import FILE_KINDS
from repro.data.views import BYTE_VOCABS
from repro.errors import UserError
from repro.models import FAMILIES, family


class SpecError(UserError):
    """A manifest section does not match its schema. ``key`` is the dotted path of the offending key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


@dataclass
class DataSpec:
    name: str = "wiki-lead8"
    block: int = 512  # training context: characters per block (text) or the sequence length (images/audio)
    path: str | None = None  # `file` corpora: the file (relative: to the manifest's folder)
    kind: str | None = None  # `file` corpora: bytes | chars | text8
    sha256: str | None = later(None)  # `file` corpora: the file's content hash, set when the manifest resolves
    vocab: str | None = None  # byte corpora: bytes (256) | as205 (adaptive-span's observed-symbol vocabulary)
    seq_len: int | None = None  # audio: samples per sequence

    @property
    def label(self) -> str:
        """The dataset in words: its name, or a `file` corpus's file name and short content hash."""
        if self.name == "file" and self.path and self.sha256:
            return f"{Path(self.path).name}@{self.sha256[:8]}"
        return self.name

    def options(self) -> dict[str, Any]:
        """The dataset options passed to ``repro.data.open_split`` (the ones that are set)."""
        return {
            k: v
            for k, v in (("path", self.path), ("kind", self.kind), ("vocab", self.vocab), ("seq_len", self.seq_len))
            if v is not None
        }


@dataclass
class TrainSpec:
    optimizer: Literal["adagrad", "adam", "adamw"] = "adam"
    lr: float = 3e-4
    warmup: int = 0  # steps of linear warm-up from 0
    schedule: Literal["constant", "cosine"] = "constant"  # after warm-up
    final_phase: int = 0  # the last `final_phase` of the `steps` run at lr / 10 (adaptive-span large models)
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    clip: float = 0.0  # 0 = no clipping
    # global_norm: all gradients together (any optimiser); per_tensor: Adagrad only, the official
    # adaptive-span semantics (the clip scales each tensor's learning rate, see repro.train.optim)
    clip_mode: Literal["per_tensor", "global_norm"] = "global_norm"
    batch_size: int = 8
    steps: int = 1000
    precision: Literal["32-true", "bf16-mixed", "16-mixed"] = "32-true"
    val_every: int = 0  # steps between quick validations (0 = only the final full evaluation)
    val_tokens: int = 65536  # targets scored by each quick validation (the final evaluation scores all)
    checkpoint_every: int = 100
    log_every: int = 10
    seed: int = 0
    # text streams (repro.data.batching.StreamBatches): `wrap` restarts every pass at offset 0 and carries
    # the recurrent cache across the wrap; `random_offset` is the official adaptive-span trainer's: every
    # pass after the first starts the streams at a seeded random offset in [0, block), cache reset
    stream_passes: Literal["wrap", "random_offset"] = later("wrap")
    # the weights scored at the end: `last`, or `best_valid` (the lowest quick-validation bits, kept in
    # best.ckpt; needs val_every), as the Sparse Transformer paper scores its best model
    select: Literal["last", "best_valid"] = later("last")
    # intra-op threads the run trains and evaluates with, whatever OMP_NUM_THREADS says (the bits depend on
    # it: repro.train.environment); the stored runs were trained with 2
    threads: int = later(2)


@dataclass
class EvalSpec:
    batch_size: int = 16
    min_context: int | None = None  # stateless models: context every scored token has (None = block // 2)
    splits: list[str] = field(default_factory=lambda: ["valid", "test"])
    # stateless models: also score the test split at each of these minimum contexts (one trained
    # model, several evaluations; the Sparse Transformer's Table 3) -> summary `test_bits_ctx<N>`
    context_sweep: list[int] = field(default_factory=list)


@dataclass
class RunSpec:
    manifest: str
    scale: str
    cell: dict[str, Any]  # the grid values of this run (dotted keys), empty for a single-run manifest
    family: str
    data: DataSpec
    model: Any  # the family's Config dataclass
    train: TrainSpec
    eval: EvalSpec

    def resolved(self) -> dict[str, Any]:
        """Plain-dict form of everything that determines the run's result. Fields added later are left out
        at their defaults (``repro.config.fields.later``: ``data.sha256`` without a `file` corpus, ...), so earlier
        specs keep their ids."""
        return {
            "data": plain(self.data),
            "model": {"family": self.family, **plain(self.model)},
            "train": plain(self.train),
            "eval": plain(self.eval),
        }

    @property
    def run_id(self) -> str:
        """Stable hash of the resolved spec (seed included); the run's directory name. A `file` corpus
        enters by its content hash, not its location: the same corpus anywhere is the same run, an
        edited one a new run."""
        identity = self.resolved()
        if self.data.sha256 is not None:
            del identity["data"]["path"]
        blob = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def cell_name(self) -> str:
        """The grid cell in words, e.g. ``kind=adaptive limit=4096`` (the W&B run name)."""
        if not self.cell:
            return self.manifest
        return " ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in self.cell.items())


@dataclass(frozen=True)
class Bound:
    """The allowed range of a numeric key (of every element, for a list)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def admits(self, v: float) -> bool:
        return (self.low is None or (v > self.low if self.low_open else v >= self.low)) and (
            self.high is None or (v < self.high if self.high_open else v <= self.high)
        )

    def __str__(self) -> str:
        parts = [f"{'>' if self.low_open else '>='} {self.low}"] if self.low is not None else []
        parts += [f"{'<' if self.high_open else '<='} {self.high}"] if self.high is not None else []
        return " and ".join(parts)


POSITIVE, NON_NEGATIVE = Bound(1), Bound(0)
# Every bounded key, by dotted path (model keys of every family; a family without the key skips it).
BOUNDS = {
    "data.block": POSITIVE,
    "data.seq_len": Bound(2),
    "model.layers": POSITIVE,
    "model.d_model": POSITIVE,
    "model.d_ff": POSITIVE,
    "model.heads": POSITIVE,
    "model.dropout": Bound(0, 1, high_open=True),
    "model.stride": POSITIVE,
    "model.c": POSITIVE,
    "model.ff_mult": Bound(0, low_open=True),
    "model.qk_mult": Bound(0, low_open=True),
    "model.init_std": Bound(0, low_open=True),
    "model.span.limit": POSITIVE,
    "model.span.ramp": POSITIVE,
    "model.span.loss_coef": NON_NEGATIVE,
    "model.span.init": Bound(0, 1),
    "train.lr": Bound(0, 10, low_open=True),
    "train.warmup": NON_NEGATIVE,
    "train.final_phase": NON_NEGATIVE,
    "train.weight_decay": NON_NEGATIVE,
    "train.betas": Bound(0, 1, high_open=True),
    "train.clip": NON_NEGATIVE,
    "train.batch_size": POSITIVE,
    "train.steps": POSITIVE,
    "train.val_every": NON_NEGATIVE,
    "train.val_tokens": POSITIVE,
    "train.checkpoint_every": POSITIVE,
    "train.log_every": POSITIVE,
    "train.seed": Bound(0, 2**32 - 1),
    "train.threads": POSITIVE,
    "eval.batch_size": POSITIVE,
    "eval.min_context": NON_NEGATIVE,
    "eval.context_sweep": NON_NEGATIVE,
}


def _check_bound(key: str, value: Any) -> None:
    bound = BOUNDS.get(key)
    if bound is None or value is None:
        return
    for i, v in enumerate(value if isinstance(value, list) else [value]):
        if not bound.admits(v):
            where = f"{key}[{i}]" if isinstance(value, list) else key
            raise SpecError(where, f"got {v!r}; allowed: {bound}")


def build(cls: type, data: Any, path: str = "") -> Any:
    """Instantiate dataclass ``cls`` from ``data``, validating keys, types and value ranges recursively."""
    if not isinstance(data, dict):
        raise SpecError(path, f"expected a mapping, got {_show(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        key = f"{path}.{unknown[0]}" if path else str(unknown[0])
        raise SpecError(key, f"unknown key; allowed keys: {', '.join(sorted(fields))}")
    values = {name: _coerce(hints[name], value, f"{path}.{name}" if path else name) for name, value in data.items()}
    for name, value in values.items():
        _check_bound(f"{path}.{name}" if path else name, value)
    return cls(**values)


def _coerce(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(arg, value, path)
            except SpecError as err:
                errors.append(err)
        raise errors[0]
    if origin is Literal:
        if value not in args:
            raise SpecError(path, f"expected one of {', '.join(map(str, args))}, got {_show(value)}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise SpecError(path, f"expected a list, got {_show(value)}")
        return [_coerce(args[0], v, f"{path}[{i}]") for i, v in enumerate(value)] if args else value
    if origin is dict:
        if not isinstance(value, dict):
            raise SpecError(path, f"expected a mapping, got {_show(value)}")
        return value
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path)
    if tp is bool:
        if not isinstance(value, bool):
            raise SpecError(path, f"expected true or false, got {_show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise SpecError(path, f"expected an integer, got {_show(value)}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "2e-6" as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(path, f"expected a number, got {_show(value)}")
        if not math.isfinite(float(value)):
            raise SpecError(path, f"got {value!r}; allowed: a finite number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise SpecError(path, f"expected a string, got {_show(value)}")
        return value
    raise TypeError(f"unsupported spec type {tp!r} at {path}")  # a schema bug, not user input


def _show(value: Any) -> str:
    return f"{type(value).__name__} {value!r}" if not isinstance(value, (dict, list)) else type(value).__name__


def build_run(manifest: str, scale: str, cell: dict[str, Any], config: dict[str, Any]) -> RunSpec:
    """A RunSpec from a merged config dict with sections ``data``, ``model``, ``train`` and ``eval``."""
    allowed = {"data", "model", "train", "eval"}
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise SpecError(unknown[0], f"unknown section; allowed: {', '.join(sorted(allowed))}")
    model = dict(config.get("model") or {})
    name = model.pop("family", None)
    if name not in FAMILIES:
        raise SpecError("model.family", f"expected one of {', '.join(sorted(FAMILIES))}, got {name!r}")
    train = build(TrainSpec, config.get("train") or {}, "train")
    if train.clip_mode == "per_tensor" and train.clip > 0 and train.optimizer != "adagrad":
        raise SpecError(
            "train.clip_mode",
            f"per_tensor clipping is the official adaptive-span Adagrad's "
            f"(it scales each tensor's learning rate); with optimizer {train.optimizer!r} use "
            f"global_norm",
        )
    if train.select == "best_valid" and not train.val_every:
        raise SpecError("train.select", "best_valid picks the best quick validation: set train.val_every > 0")
    spec = RunSpec(
        manifest=manifest,
        scale=scale,
        cell=dict(cell),
        family=name,
        data=build(DataSpec, config.get("data") or {}, "data"),
        model=build(family(name).Config, model, "model"),
        train=train,
        eval=build(EvalSpec, config.get("eval") or {}, "eval"),
    )
    check_relations(spec)
    return spec


def check_relations(spec: RunSpec) -> None:
    """Constraints between keys, and the dataset's, that need no data (sizes are checked at run)."""
    d, m, e = spec.data, spec.model, spec.eval
    if d.name not in catalog.names():
        raise SpecError("data.name", f"got {d.name!r}; allowed: one of {', '.join(catalog.names())}")
    options = catalog.get(d.name).options
    for key, value in d.options().items():
        if key not in options:
            raise SpecError(
                f"data.{key}",
                f"got {value!r}; dataset {d.name} takes no {key} "
                f"(it takes: {', '.join(sorted(options)) or 'no options'})",
            )
    for key, value, allowed in (("kind", d.kind, FILE_KINDS), ("vocab", d.vocab, BYTE_VOCABS)):
        if value is not None and value not in allowed:
            raise SpecError(f"data.{key}", f"got {value!r}; allowed: one of {', '.join(allowed)}")
    heads = getattr(m, "heads", None)
    for key, width in (
        ("d_model", getattr(m, "d_model", None)),
        ("qk_mult", round(m.d_model * m.qk_mult) if hasattr(m, "qk_mult") else None),
    ):
        if heads is not None and width is not None and (width < heads or width % heads):
            value = getattr(m, key)
            raise SpecError(
                f"model.{key}",
                f"got {value!r}: a width of {width} does not split into "
                f"model.heads = {heads} equal heads; allowed: a multiple of {heads}",
            )
    pattern = getattr(m, "pattern", "dense")
    if pattern == "fixed" and (m.c is None or m.c > m.stride):
        raise SpecError("model.c", f"got {m.c!r}; allowed: 1 to model.stride = {m.stride} (the fixed pattern)")
    if pattern != "dense" and getattr(m, "combine", None) == "multihead" and heads < 2:
        raise SpecError("model.heads", f"got {heads}; allowed: >= 2 with combine: multihead")
    if getattr(m, "embedding", None) == "data" and catalog.get(d.name).info.shape is None:
        raise SpecError("model.embedding", f"got 'data'; allowed: attn (dataset {d.name} is not an image dataset)")
    if spec.train.final_phase > spec.train.steps:
        raise SpecError(
            "train.final_phase", f"got {spec.train.final_phase}; allowed: <= train.steps = {spec.train.steps}"
        )
    for i, split in enumerate(e.splits):
        if split not in ("train", "valid", "test") or split in e.splits[:i]:
            raise SpecError(f"eval.splits[{i}]", f"got {split!r}; allowed: train, valid, test, each once")
    for key, context in [("eval.min_context", e.min_context)] + [
        (f"eval.context_sweep[{i}]", c) for i, c in enumerate(e.context_sweep)
    ]:
        if context is not None and context >= d.block:
            raise SpecError(key, f"got {context}; allowed: < data.block = {d.block}")
