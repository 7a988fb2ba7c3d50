"""Typed run specifications.

A :class:`RunSpec` is one fully resolved training run: its data, model, train and eval sections.
Sections are :class:`repro.config.fields.Section` models, each key's type, default and bounds on its line
(the model families' in :mod:`repro.config.families`); :func:`build_run` validates a plain dict (from
YAML) against them, naming the key path in the error, and :func:`check_relations` checks what ties keys
together (heads divide the width, contexts fit the block, the dataset exists and takes the options).
The run id is a stable hash of the resolved spec; :meth:`RunSpec.record` is the run's spec.yaml and
:func:`from_record` reads one back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from repro.config.cells import cell_text
from repro.config.families import FAMILIES, SparseTransformerConfig
from repro.config.fields import Float, Int, Section, SpecError, build, later, plain, refuse
from repro.config.keys import show
from repro.config.synthetic import SyntheticSpec
from repro.data import catalog
from repro.data.text import FILE_KINDS
from repro.data.views import BYTE_VOCABS
from repro.identity import SECTIONS, spec_id


class DataSpec(Section):
    name: str = "wiki-lead8"
    block: Int = Field(512, ge=1)  # training context: characters per block (text) or the sequence length (images/audio)
    path: str | None = None  # `file` corpora: the file (relative: to the manifest's folder)
    kind: str | None = None  # `file` corpora: bytes | chars | text8
    sha256: str | None = later(None)  # `file` corpora: the file's content hash, set when the manifest resolves
    vocab: str | None = None  # byte corpora: bytes (256) | as205 (adaptive-span's observed-symbol vocabulary)
    seq_len: Int | None = Field(None, ge=2)  # audio: samples per sequence
    synthetic: SyntheticSpec | None = later(None)  # `synthetic` corpora: the generator, its parameters and seed

    @property
    def label(self) -> str:
        """The dataset in words: its name, or a `file` corpus's file name and short content hash."""
        if self.name == "file" and self.path and self.sha256:
            return f"{Path(self.path).name}@{self.sha256[:8]}"
        if self.synthetic is not None:
            return f"synthetic {self.synthetic.label}"
        return self.name

    def options(self) -> dict[str, Any]:
        """The dataset options passed to ``repro.data.open_split`` (the ones that are set)."""
        synthetic = self.synthetic.option() if self.synthetic is not None else None
        return {
            k: v
            for k, v in (
                *(("path", self.path), ("kind", self.kind), ("vocab", self.vocab), ("seq_len", self.seq_len)),
                ("synthetic", synthetic),
            )
            if v is not None
        }


class WeightsSpec(Section):
    """Trained weights a run evaluates instead of training (repro.pretrained): the official adaptive-span
    code's released checkpoint ``name`` (downloaded), or an imported checkpoint file by its ``sha256``."""

    source: Literal["official"] = "official"
    name: str | None = None  # enwik8 | enwik8_large | text8 | text8_large (repro.pretrained.released)
    sha256: str | None = None

    @model_validator(mode="after")
    def _rules(self) -> WeightsSpec:
        if (self.name is None) == (self.sha256 is None):
            raise refuse("give exactly one of name (a released checkpoint) and sha256 (an imported file)", "name")
        return self


class TrainSpec(Section):
    optimizer: Literal["adagrad", "adam", "adamw"] = "adam"
    lr: Float = Field(3e-4, gt=0, le=10)
    warmup: Int = Field(0, ge=0)  # steps of linear warm-up from 0
    schedule: Literal["constant", "cosine"] = "constant"  # after warm-up
    final_phase: Int = Field(
        0, ge=0
    )  # the last `final_phase` of the `steps` run at lr / 10 (adaptive-span large models)
    weight_decay: Float = Field(0.0, ge=0)
    betas: list[Annotated[Float, Field(ge=0, lt=1)]] = Field(default_factory=lambda: [0.9, 0.999])
    clip: Float = Field(0.0, ge=0)  # 0 = no clipping
    # global_norm: all gradients together (any optimiser); per_tensor: Adagrad only, the official
    # adaptive-span semantics (the clip scales each tensor's learning rate, see repro.train.optim)
    clip_mode: Literal["per_tensor", "global_norm"] = "global_norm"
    batch_size: Int = Field(8, ge=1)
    steps: Int = Field(1000, ge=1)
    # auto: bf16-mixed where the hardware runs bf16 natively, else 32-true, resolved per machine and recorded
    # (repro/train/environment.py; measured per family in docs/throughput.md)
    precision: Literal["32-true", "bf16-mixed", "16-mixed", "auto"] = "32-true"
    val_every: Int = Field(0, ge=0)  # steps between quick validations (0 = only the final full evaluation)
    val_tokens: Int = Field(65536, ge=1)  # targets scored by each quick validation (the final evaluation scores all)
    checkpoint_every: Int = Field(100, ge=1)
    log_every: Int = Field(10, ge=1)
    seed: Int = Field(0, ge=0, le=2**32 - 1)
    # text streams (repro.data.batching.StreamBatches): `wrap` restarts every pass at offset 0 and carries
    # the recurrent cache across the wrap; `random_offset` is the official adaptive-span trainer's: every
    # pass after the first starts the streams at a seeded random offset in [0, block), cache reset
    stream_passes: Literal["wrap", "random_offset"] = later("wrap")
    # the weights scored at the end: `last`, or `best_valid` (the lowest quick-validation bits, kept in
    # best.ckpt; needs val_every), as the Sparse Transformer paper scores its best model
    select: Literal["last", "best_valid"] = later("last")
    # intra-op threads the run trains and evaluates with, whatever OMP_NUM_THREADS says (the bits depend on
    # it: repro.train.environment); the stored runs were trained with 2
    threads: Int = later(2, ge=1)
    # evaluate these trained weights instead of training (the other train keys then say how they were trained)
    weights: WeightsSpec | None = later(None)

    @model_validator(mode="after")
    def _rules(self) -> TrainSpec:
        if self.clip_mode == "per_tensor" and self.clip > 0 and self.optimizer != "adagrad":
            raise refuse(
                "per_tensor clipping is the official adaptive-span Adagrad's (it scales each tensor's learning "
                f"rate); with optimizer {self.optimizer!r} use global_norm",
                "clip_mode",
            )
        if self.select == "best_valid" and not self.val_every:
            raise refuse("best_valid picks the best quick validation: set train.val_every > 0", "select")
        if self.final_phase > self.steps:
            raise refuse(f"got {self.final_phase}; allowed: <= train.steps = {self.steps}", "final_phase")
        return self


class EvalSpec(Section):
    batch_size: Int = Field(16, ge=1)
    min_context: Int | None = Field(None, ge=0)  # stateless models: context every scored token has (None = block // 2)
    splits: list[str] = Field(default_factory=lambda: ["valid", "test"])
    # stateless models: also score the test split at each of these minimum contexts (one trained
    # model, several evaluations; the Sparse Transformer's Table 3) -> summary `test_bits_ctx<N>`
    context_sweep: list[Annotated[Int, Field(ge=0)]] = Field(default_factory=list)
    # evaluated weights (train.weights): score only each split's first `prefix` tokens, a quick look, labelled
    prefix: Int | None = later(None, ge=2)

    @model_validator(mode="after")
    def _rules(self) -> EvalSpec:
        for i, split in enumerate(self.splits):
            if split not in ("train", "valid", "test") or split in self.splits[:i]:
                raise refuse(f"got {split!r}; allowed: train, valid, test, each once", f"splits[{i}]")
        return self


@dataclass
class RunSpec:
    manifest: str
    scale: str
    cell: dict[str, Any]  # the grid values of this run (dotted keys), empty for a single-run manifest
    family: str
    data: DataSpec
    model: Section  # the family's section (repro.config.families)
    train: TrainSpec
    eval: EvalSpec

    def resolved(self, identity: bool = False) -> dict[str, Any]:
        """Plain-dict form of everything that determines the run's result. Fields added later are left out
        at their defaults (``repro.config.fields.later``: ``data.sha256`` without a `file` corpus, ...), so earlier
        specs keep their ids; ``identity``: renamed values as the run id hashes them (``model.window``)."""
        return {
            "data": plain(self.data, identity),
            "model": {"family": self.family, **plain(self.model, identity)},
            "train": plain(self.train, identity),
            "eval": plain(self.eval, identity),
        }

    @property
    def run_id(self) -> str:
        """Stable hash of the resolved spec (seed included); the run's directory name. A `file` corpus
        enters by its content hash, not its location: the same corpus anywhere is the same run, an
        edited one a new run."""
        return spec_id(self.resolved(identity=True))

    @property
    def cell_name(self) -> str:
        """The grid cell in words, e.g. ``kind=adaptive limit=4096`` (the W&B run name)."""
        return cell_text(self.cell) or self.manifest

    def record(self, code_version: str | None) -> dict[str, Any]:
        """The run's spec.yaml: its id, where it comes from, the code that trained it, the resolved spec."""
        return {
            "run_id": self.run_id,
            "manifest": self.manifest,
            "scale": self.scale,
            "cell": self.cell,
            "code_version": code_version,
            **self.resolved(identity=True),  # the values as the id hashes them, so the store can check it
        }


def from_record(record: dict[str, Any]) -> RunSpec:
    """The RunSpec of a stored spec.yaml (or a W&B run's config, which holds the same keys)."""
    sections = {k: record.get(k) for k in SECTIONS}
    return build_run(record.get("manifest"), record.get("scale"), record.get("cell") or {}, sections)


def build_run(manifest: str, scale: str, cell: dict[str, Any], config: dict[str, Any]) -> RunSpec:
    """A RunSpec from a merged config dict with sections ``data``, ``model``, ``train`` and ``eval``."""
    unknown = sorted(set(config) - set(SECTIONS))
    if unknown:
        raise SpecError(unknown[0], f"unknown section; allowed: {', '.join(sorted(SECTIONS))}")
    for section in sorted(SECTIONS):
        if config.get(section) is not None and not isinstance(config[section], dict):
            raise SpecError(section, f"expected a mapping of its keys, got {show(config[section])}")
    model = dict(config.get("model") or {})
    name = model.pop("family", None)
    if name not in FAMILIES:
        raise SpecError("model.family", f"expected one of {', '.join(sorted(FAMILIES))}, got {name!r}")
    train = build(TrainSpec, config.get("train") or {}, "train")
    spec = RunSpec(
        manifest=manifest,
        scale=scale,
        cell=dict(cell),
        family=name,
        data=build(DataSpec, config.get("data") or {}, "data"),
        model=build(FAMILIES[name], model, "model"),
        train=train,
        eval=build(EvalSpec, config.get("eval") or {}, "eval"),
    )
    check_relations(spec)
    return spec


def check_relations(spec: RunSpec) -> None:
    """Constraints between sections, and the dataset's, that need no data (sizes are checked at run; those
    within a section are its model validators: :mod:`repro.config.families`, TrainSpec, EvalSpec)."""
    d, m, e = spec.data, spec.model, spec.eval
    if d.name not in catalog.names():
        raise SpecError("data.name", f"got {d.name!r}; allowed: one of {', '.join(catalog.names())}")
    if (d.name == "synthetic") != (d.synthetic is not None):
        raise SpecError(
            "data.synthetic",
            "a synthetic corpus needs data.name: synthetic and its data.synthetic section (generator, ...); "
            f"got name {d.name!r} with{'' if d.synthetic is not None else 'out'} the section",
        )
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
    if spec.train.weights is not None and spec.family != "adaptive_span":
        raise SpecError("train.weights", f"official weights are adaptive-span models; model.family is {spec.family}")
    if e.prefix is not None and spec.train.weights is None:
        raise SpecError(
            "eval.prefix", f"got {e.prefix}; allowed only with train.weights (a trained run scores every target)"
        )
    if isinstance(m, SparseTransformerConfig) and m.embedding == "data" and catalog.get(d.name).info.shape is None:
        raise SpecError("model.embedding", f"got 'data'; allowed: attn (dataset {d.name} is not an image dataset)")
    for key, context in [("eval.min_context", e.min_context)] + [
        (f"eval.context_sweep[{i}]", c) for i, c in enumerate(e.context_sweep)
    ]:
        if context is not None and context >= d.block:
            raise SpecError(key, f"got {context}; allowed: < data.block = {d.block}")
