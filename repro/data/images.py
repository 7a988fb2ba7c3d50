"""Image datasets as byte sequences: pixels in raster order, channels innermost (r, g, b, r, g, b, ...).

A validation split is held out from the training images with a fixed seed (:func:`holdout`), as the
Sparse Transformer paper does for CIFAR-10 (48,000 / 2,000); the official test images are the test split.
Downsampled ImageNet is :mod:`repro.data.imagenet`.
"""

from __future__ import annotations

import io
import pickle

import numpy as np

from repro.data import archives
from repro.data import vocab as vocabs
from repro.data.debian import Package, Release
from repro.data.errors import DataError
from repro.data.fetch import Pin
from repro.data.job import Job
from repro.data.on_disk import save_array

HOLDOUT_SEED = 0


def holdout(n: int, k: int, seed: int = HOLDOUT_SEED) -> np.ndarray:
    """Boolean mask of ``k`` of ``n`` items chosen with a fixed seed (the validation images)."""
    mask = np.zeros(n, dtype=bool)
    mask[np.random.default_rng(seed).permutation(n)[:k]] = True
    return mask


def planar_to_raster(planes: np.ndarray, side: int) -> np.ndarray:
    """(N, 3*side*side) stored as R plane, G plane, B plane -> (N, side*side*3) raster, channels innermost."""
    n = len(planes)
    return planes.reshape(n, 3, side, side).transpose(0, 2, 3, 1).reshape(n, side * side * 3)


def image_meta(vocab_size: int, splits: dict, source: dict) -> dict:
    return {"vocab": vocabs.values(vocab_size, "dim").to_json(), "splits": splits, "source": source}


# --- CIFAR-10 (python version) ----------------------------------------------------------------------

CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR_FILE = "cifar-10-python.tar.gz"
CIFAR_PIN = Pin(170_498_071, "c58f30108f718f92721af3b95e74349a", "md5")
CIFAR_MEMBERS = {  # member -> md5 (the values torchvision also checks)
    "cifar-10-batches-py/data_batch_1": "c99cafc152244af753f735de768cd75f",
    "cifar-10-batches-py/data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "cifar-10-batches-py/data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "cifar-10-batches-py/data_batch_4": "634d18415352ddfa80567beed471001a",
    "cifar-10-batches-py/data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "cifar-10-batches-py/test_batch": "40351d587109b95175f43aff81a1287e",
}
CIFAR_VALID = 2_000


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles the CIFAR batches (dicts of numpy arrays, lists, bytes) and nothing else."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def cifar_batch(name: str, raw: bytes) -> np.ndarray:
    try:
        batch = _ArrayUnpickler(io.BytesIO(raw), encoding="bytes").load()
        data = np.asarray(batch[b"data"], dtype=np.uint8)
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError) as e:
        raise DataError(f"{name}: not a CIFAR-10 batch ({type(e).__name__}: {e})") from None
    if data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"{name}: expected (N, 3072) pixels, got {data.shape}")
    return planar_to_raster(data, 32)


def prepare_cifar10(job: Job) -> dict:
    tarball = job.src or job.download(CIFAR_URL, CIFAR_FILE, CIFAR_PIN)
    if job.src is not None:
        job.check_file(tarball, CIFAR_PIN)
    members = archives.tar_members(tarball, list(CIFAR_MEMBERS))
    for name, md5 in CIFAR_MEMBERS.items():
        job.check_bytes(name, members[name], Pin(None, md5, "md5"))
    train = np.concatenate([cifar_batch(n, members[n]) for n in list(CIFAR_MEMBERS)[:5]])
    valid = holdout(len(train), CIFAR_VALID)
    splits = {
        "train": save_array(job.out, "train", train[~valid]),
        "valid": save_array(job.out, "valid", train[valid]),
        "test": save_array(job.out, "test", cifar_batch("test_batch", members[list(CIFAR_MEMBERS)[5]])),
    }
    return image_meta(256, splits, {"url": CIFAR_URL})


# --- Fashion-MNIST (Debian dataset-fashion-mnist) ---------------------------------------------------

FASHION_FILES = ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte")  # pinned decompressed
FASHION = Package(
    "dataset-fashion-mnist",
    "usr/share/datasets/fashion-mnist",
    (
        Release(
            "0.0~git20200523.55506a9-1",
            Pin(30_900_652, "39e172fe32dd318ebb3e512220c3beea2fa47d7e20bab348fb4e0922d6beefc0"),
            {
                # md5: f4a8712d7a061bf5bd6d2ca38dc4d50a, 8181f5470baa50b63fa0f6fddb340f0a
                "train-images-idx3-ubyte": Pin(
                    47_040_016, "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"
                ),
                "t10k-images-idx3-ubyte": Pin(
                    7_840_016, "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"
                ),
            },
        ),
    ),
)
FASHION_VALID = 5_000


def idx_images(name: str, raw: bytes) -> np.ndarray:
    """Images of an IDX3 file (magic 2051, big-endian count, rows, cols) as (N, rows*cols) bytes."""
    header = np.frombuffer(raw[:16], dtype=">u4") if len(raw) >= 16 else np.zeros(0)
    if len(header) != 4 or header[0] != 2051 or len(raw) != 16 + int(np.prod(header[1:])):
        raise DataError(f"{name}: not an IDX image file")
    n, rows, cols = map(int, header[1:])
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows * cols)


def read_fashion(job: Job, name: str) -> np.ndarray:
    path = next((p for p in (job.src / name, job.src / f"{name}.gz") if p.exists()), None)
    if path is None:
        raise DataError(f"{job.src}: {name}[.gz] not found")
    raw = archives.gunzip_or_read(path)
    job.check_release(name, f"{path} (decompressed)", raw)
    return idx_images(str(path), raw)


def prepare_fashion_mnist(job: Job) -> dict:
    train = read_fashion(job, FASHION_FILES[0])
    valid = holdout(len(train), FASHION_VALID)
    splits = {
        "train": save_array(job.out, "train", train[~valid]),
        "valid": save_array(job.out, "valid", train[valid]),
        "test": save_array(job.out, "test", read_fashion(job, FASHION_FILES[1])),
    }
    return image_meta(256, splits, {})
