"""Downsampled ImageNet 64x64: the van den Oord et al. (2016) tars the paper used (PNG files, pinned), and
the Chrabaszcz et al. (2017) npz batches as a named alternative; small archives built here."""

import io
import tarfile

import numpy as np
import pytest
from PIL import Image

import repro.data as data
from repro.data import imagenet
from repro.data.errors import ChecksumMismatch, DataError


def picture(k: int, side: int = 64) -> np.ndarray:
    """(side, side, 3) pixels whose values encode (image k, row, column, channel)."""
    r, c, ch = np.meshgrid(np.arange(side), np.arange(side), np.arange(3), indexing="ij")
    return ((k * 31 + r * 3 + c * 5 + ch * 70) % 256).astype(np.uint8)


def png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def write_tar(path, files: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as tar:
        for name, raw in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))


@pytest.fixture
def oord(tmp_path, monkeypatch, pin):
    """train_64x64.tar (7 PNGs stored out of name order, and a stray file) and valid_64x64.tar (3 PNGs)
    under DIR/small/, with the pins set to these archives."""
    src = tmp_path / "downloads"
    (src / "small").mkdir(parents=True)
    train = {f"train_64x64/{k:07d}.png": png(picture(k)) for k in reversed(range(7))}
    train["train_64x64/README"] = b"not an image"
    valid = {f"valid_64x64/{k:07d}.png": png(picture(100 + k)) for k in range(3)}
    tars = {"train": src / "small" / "train_64x64.tar", "test": src / "small" / "valid_64x64.tar"}
    write_tar(tars["train"], train)
    write_tar(tars["test"], valid)
    monkeypatch.setattr(imagenet, "VALID", 2)
    monkeypatch.setattr(imagenet, "OORD_TARS", {s: (p.name, pin(p.read_bytes())) for s, p in tars.items()})
    return src, tars


def rows(ks) -> np.ndarray:
    return np.stack([picture(k).reshape(-1) for k in ks])  # raster order, channels innermost


def test_oord_2016_tars_give_the_papers_splits_in_name_order(root, oord):
    src, _ = oord
    data.prepare("imagenet64", src=src)
    train, vocab = data.open_split("imagenet64", "train")
    valid, _ = data.open_split("imagenet64", "valid")
    test, _ = data.open_split("imagenet64", "test")
    held = imagenet.holdout(7, 2)
    assert np.array_equal(train, rows(np.arange(7)[~held])) and np.array_equal(valid, rows(np.arange(7)[held]))
    assert np.array_equal(test, rows([100, 101, 102]))  # the official validation images: the scored split
    assert vocab.size == 256 and data.dataset_info("imagenet64").shape == (64, 64, 3)
    assert data.verify("imagenet64") == [] and data.provenance("imagenet64") == ("oord-2016", True)
    with pytest.raises(DataError, match="has no public download; pass --from DIR"):
        data.prepare("imagenet64")


def test_oord_2016_tars_are_verified_against_their_pins(root, oord, monkeypatch):
    src, tars = oord
    monkeypatch.setattr(
        imagenet, "OORD_TARS", {**imagenet.OORD_TARS, "test": ("valid_64x64.tar", imagenet.Pin(10, "0" * 64))}
    )
    with pytest.raises(ChecksumMismatch, match=r"valid_64x64.tar: sha256 [0-9a-f]{64}, expected 0{64}; size"):
        data.prepare("imagenet64", src=src)
    assert not (root / "imagenet64").exists()
    data.prepare("imagenet64", src=src, allow_unverified=True)
    assert data.provenance("imagenet64") == ("oord-2016", False)
    assert "sources were not verified" in data.verify("imagenet64")[0]


def test_oord_2016_refuses_a_wrong_image_or_a_missing_tar(root, oord, pin, monkeypatch):
    src, tars = oord
    write_tar(tars["test"], {"valid_64x64/0000000.png": png(picture(0, side=32))})
    monkeypatch.setitem(imagenet.OORD_TARS, "test", ("valid_64x64.tar", pin(tars["test"].read_bytes())))
    with pytest.raises(DataError, match=r"valid_64x64/0000000.png: expected a 64x64 RGB image, got RGB 32x32"):
        data.prepare("imagenet64", src=src)
    assert not (root / "imagenet64").exists()
    tars["test"].unlink()
    with pytest.raises(DataError, match="valid_64x64.tar not found; expected train_64x64.tar and valid_64x64.tar"):
        data.prepare("imagenet64", src=src)


def planar(n: int, offset: int) -> np.ndarray:
    """(n, 12288) in the npz storage order (R plane, G plane, B plane)."""
    i, c, p = np.meshgrid(np.arange(n), np.arange(3), np.arange(64 * 64), indexing="ij")
    return ((offset + i * 7 + c * 50 + p) % 256).astype(np.uint8).reshape(n, -1)


def test_chrabaszcz_2017_npz_batches_in_numeric_order_recorded_as_unverified(root, tmp_path, monkeypatch):
    src = tmp_path / "in64"
    (src / "Imagenet64_train_npz").mkdir(parents=True)
    (src / "Imagenet64_val_npz").mkdir()
    stored = []
    for k, n in ((1, 3), (2, 3), (10, 4)):
        arr = planar(n, offset=k)
        stored.append(arr)
        np.savez_compressed(src / "Imagenet64_train_npz" / f"train_data_batch_{k}.npz", data=arr, labels=np.zeros(n))
    np.savez(src / "Imagenet64_val_npz" / "val_data.npz", data=planar(2, 99), labels=np.zeros(2))
    monkeypatch.setattr(imagenet, "VALID", 3)
    data.prepare("imagenet64-2017", src=src)
    train, _ = data.open_split("imagenet64-2017", "train")
    valid, _ = data.open_split("imagenet64-2017", "valid")
    test, _ = data.open_split("imagenet64-2017", "test")
    raster = imagenet.planar_to_raster(np.concatenate(stored), 64)
    mask = imagenet.holdout(10, 3)
    assert np.array_equal(train, raster[~mask]) and np.array_equal(valid, raster[mask])
    assert np.array_equal(test, imagenet.planar_to_raster(planar(2, 99), 64))
    assert data.provenance("imagenet64-2017") == ("chrabaszcz-2017", False)
    assert data.verify("imagenet64-2017") == [
        f"sources were not verified when prepared: {src} (no hashes are published for the 2017 npz files)"
    ]
