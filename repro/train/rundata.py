"""What a run reads, opened and checked before anything of the run is written.

Every split the run needs is opened and its sizes checked against the spec (one-line errors naming the
manifest's key); the training batches are dealt from the train split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from repro import data as datasets
from repro.config.manifest import Manifest
from repro.config.spec import RunSpec
from repro.errors import UserError
from repro.train.module import LMDataModule


@dataclass
class RunData:
    """What a run reads, opened and checked before anything is written."""

    train: np.ndarray
    vocab: Any
    info: Any
    splits: dict[str, np.ndarray]  # the evaluated splits (valid always: analyses read it)
    batches: LMDataModule
    source_version: str | None  # the dataset's source version and whether it was verified
    verified: bool
    truth: dict[str, Any] = field(default_factory=dict)  # a synthetic corpus: each split's dependencies


def open_data(spec: RunSpec, manifest: Manifest) -> RunData:
    """Open every split the run needs and check that its sizes fit the spec (UserError otherwise)."""
    options = spec.data.options()
    train, vocab = datasets.open_split(spec.data.name, "train", **options)
    names = {*spec.eval.splits, "valid", *(["test"] if spec.eval.context_sweep else [])}
    splits = {name: datasets.open_split(spec.data.name, name, **options)[0] for name in sorted(names)}
    block, where = spec.data.block, f"{manifest.path}: data.block: {spec.data.block}"
    for name, array in {"train": train, **splits}.items():
        if array.ndim == 2 and array.shape[1] != block:
            raise UserError(f"{where} differs from the sequence length of {spec.data.name}; allowed: {array.shape[1]}")
        room = (len(array) - 1) // (spec.train.batch_size if name == "train" else 1)
        streams = (len(array) - 1) // block  # how many training streams of a block the split holds
        if array.ndim == 1 and name == "train" and room < block and streams >= 1:
            raise UserError(
                f"{manifest.path}: train.batch_size: {spec.train.batch_size} streams of data.block = {block} "
                f"tokens do not fit the train split of {spec.data.name} ({len(array) - 1:,} targets); "
                f"allowed: at most {streams:,}"
            )
        if array.ndim == 1 and room < block:
            what = (
                f"{spec.train.batch_size} training streams of {room:,} tokens"
                if name == "train"
                else f"its {room:,} targets"
            )
            raise UserError(
                f"{where} is longer than the {name} split of {spec.data.name} ({what}); allowed: at most {room:,}"
            )
    try:
        batches = LMDataModule(spec, train, vocab.size)
    except UserError as err:
        raise UserError(f"{manifest.path}: {err}") from None
    source_version, verified = datasets.provenance(spec.data.name, **options)
    truth = {name: datasets.truth(spec.data.name, name, **options) for name in splits}
    info = datasets.dataset_info(spec.data.name)
    return RunData(train, vocab, info, splits, batches, source_version, verified, {k: v for k, v in truth.items() if v})
