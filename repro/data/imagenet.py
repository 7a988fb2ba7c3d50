"""Downsampled ImageNet 64x64 as 12,288-byte sequences (raster order, channels innermost), two variants.

* ``imagenet64`` — van den Oord et al. (2016), the set the Sparse Transformer paper trained on and whose
  validation images it scored: ``train_64x64.tar`` and ``valid_64x64.tar`` (one PNG per image; from
  image-net.org/small/ after logging in, or a mirror), each verified against its pinned size and sha256
  (the values TensorFlow Datasets checks). Images are read in file-name order.
* ``imagenet64-2017`` — Chrabaszcz et al. (2017), ``Imagenet64_{train,val}_npz``: a different (box)
  downsampling, so its bits per dim are not comparable with the paper's; no hashes are published for
  its files, so it is recorded as unverified.

Both hold out 10,000 training images (fixed seed) as valid; the official validation images are the test
split. The training split (~16 GB) is written into memory-mapped .npy files as it is read.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from repro.data import archives
from repro.data.errors import DataError
from repro.data.fetch import Pin
from repro.data.images import holdout, image_meta, planar_to_raster
from repro.data.job import Job
from repro.data.on_disk import split_record

VALID = 10_000
SIDE = 64
ROW = 3 * SIDE * SIDE
OORD_VERSION, CHRABASZCZ_VERSION = "oord-2016", "chrabaszcz-2017"
OORD_TARS = {  # split -> (file, pin): tensorflow_datasets url_checksums/downsampled_imagenet.txt
    "train": (
        "train_64x64.tar",
        Pin(12_112_588_800, "e2a2c1947a748d0d256e98e6d82800d855441dc9e4de2e71a773f1324c4524d7"),
    ),
    "test": ("valid_64x64.tar", Pin(477_255_680, "eeac03ec4f585baf871d2b4cb9c974bfe345e74878a74e5820fe6eb1041629cd")),
}


class _Splits:
    """Rows written in order into ``<split>.npy`` memory maps of known row counts."""

    def __init__(self, out: Path, rows: dict[str, int]):
        self.out = out
        self.arrays = {
            s: np.lib.format.open_memmap(out / f"{s}.npy", mode="w+", dtype=np.uint8, shape=(n, ROW))
            for s, n in rows.items()
        }
        self.at = dict.fromkeys(rows, 0)

    def append(self, split: str, rows: np.ndarray) -> None:
        self.arrays[split][self.at[split] : self.at[split] + len(rows)] = rows
        self.at[split] += len(rows)

    def records(self) -> dict[str, dict]:
        for array in self.arrays.values():
            array.flush()
        return {s: split_record(self.out / f"{s}.npy", a) for s, a in self.arrays.items()}


def _hold_out(splits: _Splits, batches: Iterable[np.ndarray], mask: np.ndarray) -> None:
    """Training images (in order, batch after batch) into train, and those ``mask`` holds out into valid."""
    start = 0
    for rows in batches:
        held = mask[start : start + len(rows)]
        splits.append("train", rows[~held])
        splits.append("valid", rows[held])
        start += len(rows)


def _train_rows(src: Path, n: int) -> tuple[np.ndarray, dict[str, int]]:
    if n <= VALID:
        raise DataError(f"{src}: {n:,} training images, need more than the {VALID:,} held out")
    mask = holdout(n, VALID)
    return mask, {"train": n - VALID, "valid": VALID}


# --- van den Oord et al. 2016 (the paper's) ---------------------------------------------------------


def _find(src: Path, name: str) -> Path:
    found = sorted(src.rglob(name)) if src.is_dir() else []
    if not found:
        raise DataError(
            f"{src}: {name} not found; expected train_64x64.tar and valid_64x64.tar (van den Oord "
            f"et al. 2016: image-net.org/small/ after logging in)"
        )
    return found[0]


def png_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The archive's PNG files in name order."""
    return sorted((m for m in tar.getmembers() if m.isfile() and m.name.lower().endswith(".png")), key=lambda m: m.name)


def png_pixels(name: str, raw: bytes) -> np.ndarray:
    """A 64x64 RGB PNG as 12,288 bytes in raster order, channels innermost."""
    try:
        with Image.open(io.BytesIO(raw)) as image:
            image.load()
            mode, size, pixels = image.mode, image.size, np.asarray(image)
    except (UnidentifiedImageError, OSError, SyntaxError) as e:
        raise DataError(f"{name}: not a readable PNG ({e})") from None
    if mode != "RGB" or size != (SIDE, SIDE):
        raise DataError(f"{name}: expected a {SIDE}x{SIDE} RGB image, got {mode} {size[0]}x{size[1]}")
    return pixels.reshape(ROW)


def _tar_images(
    path: Path, members: list[tarfile.TarInfo], tar: tarfile.TarFile, batch: int = 1024
) -> Iterator[np.ndarray]:
    for first in range(0, len(members), batch):
        rows = []
        for m in members[first : first + batch]:
            f = tar.extractfile(m)
            rows.append(png_pixels(f"{path}:{m.name}", f.read()))
        yield np.stack(rows)


def prepare_imagenet64(job: Job) -> dict:
    """``--from DIR`` holding train_64x64.tar and valid_64x64.tar (anywhere below DIR)."""
    tars = {split: _find(job.src, name) for split, (name, _) in OORD_TARS.items()}
    for split, (_, pin) in OORD_TARS.items():
        job.check_file(tars[split], pin)
    with (
        archives.reading(tars["train"]),
        tarfile.open(tars["train"]) as train,
        archives.reading(tars["test"]),
        tarfile.open(tars["test"]) as test,
    ):
        members = {"train": png_members(train), "test": png_members(test)}
        mask, rows = _train_rows(tars["train"], len(members["train"]))
        if not members["test"]:
            raise DataError(f"{tars['test']}: no PNG images")
        splits = _Splits(job.out, {**rows, "test": len(members["test"])})
        _hold_out(splits, _tar_images(tars["train"], members["train"], train), mask)
        for rows_ in _tar_images(tars["test"], members["test"], test):
            splits.append("test", rows_)
    return image_meta(256, splits.records(), {"dir": str(job.src), "version": OORD_VERSION})


# --- Chrabaszcz et al. 2017 (a named alternative) -----------------------------------------------------


def npz_rows(path: Path) -> int:
    """Number of images in an npz batch, read from the array header without decompressing the data."""
    with archives.reading(path), zipfile.ZipFile(path) as z, z.open("data.npy") as f:
        major, _ = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, _, _ = read_header(f)
    return shape[0]


def npz_images(path: Path) -> np.ndarray:
    with archives.reading(path), np.load(path, allow_pickle=False) as z:
        data = z["data"]
    if data.ndim != 2 or data.shape[1] != ROW:
        raise DataError(f"{path}: expected (N, {ROW}) pixels, got {data.shape}")
    return planar_to_raster(data.astype(np.uint8, copy=False), SIDE)


def npz_files(src: Path) -> tuple[list[Path], Path]:
    train = sorted(src.rglob("train_data_batch_*.npz"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    val = sorted(src.rglob("val_data.npz"))
    if not train or not val:
        raise DataError(
            f"{src}: expected Imagenet64_train_npz/train_data_batch_*.npz and "
            f"Imagenet64_val_npz/val_data.npz (download them from image-net.org after logging in)"
        )
    return train, val[0]


def prepare_imagenet64_2017(job: Job) -> dict:
    """``--from DIR`` holding the npz batches; the training batches in numeric order."""
    train_files, val_file = npz_files(job.src)
    counts = [npz_rows(p) for p in train_files]
    mask, rows = _train_rows(job.src, sum(counts))
    test = npz_images(val_file)
    splits = _Splits(job.out, {**rows, "test": len(test)})

    def batches() -> Iterator[np.ndarray]:
        for path, n in zip(train_files, counts):
            images = npz_images(path)
            if len(images) != n:
                raise DataError(f"{path}: header says {n} images, data has {len(images)}")
            yield images

    _hold_out(splits, batches(), mask)
    splits.append("test", test)
    job.unverified.append(f"{job.src} (no hashes are published for the 2017 npz files)")
    return image_meta(
        256, splits.records(), {"dir": str(job.src), "train_files": len(train_files), "version": CHRABASZCZ_VERSION}
    )
