"""Datasets of the two papers, prepared as their communities prepare them, plus offline stand-ins.

Public API::

    open_split(name, split, root=None, **options) -> (array, Vocab)   # memory-mapped uint8/uint16
    dataset_info(name) -> DatasetInfo;  names() -> list[str];  data_root(root=None) -> Path
    prepare(name, src=None, root=None, allow_unverified=False, **options) -> Path
    missing(name, root=None, **options) -> None | what `repro run` does;  ensure(name, echo, ...)
    provenance(name, root=None, **options) -> (source version or None, verified)
    truth(name, split, **options) -> what each token of a synthetic corpus depends on (else None)
    DataError, DatasetMissing (both UserError: one-line message, exit status 2)

and :mod:`repro.data.batching` for training/evaluation batches. What each dataset is, its pins, splits
and vocabularies: docs/datasets.md.
"""

from __future__ import annotations

from repro.data.api import (
    dataset_dir,
    ensure,
    is_prepared,
    missing,
    open_split,
    prepare,
    prepare_command,
    provenance,
    truth,
    verify,
)
from repro.data.catalog import DatasetInfo, get, names
from repro.data.errors import DataError, DatasetMissing
from repro.data.on_disk import data_root
from repro.data.vocab import Vocab


def dataset_info(name: str) -> DatasetInfo:
    """What dataset ``name`` is (kind, unit, image shape, source); DataError if unknown."""
    return get(name).info


__all__ = [
    "DataError",
    "DatasetInfo",
    "DatasetMissing",
    "Vocab",
    "data_root",
    "dataset_dir",
    "dataset_info",
    "ensure",
    "is_prepared",
    "missing",
    "names",
    "open_split",
    "prepare",
    "prepare_command",
    "provenance",
    "truth",
    "verify",
]
