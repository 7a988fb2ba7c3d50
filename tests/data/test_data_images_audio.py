import gzip
import io
import pickle
import tarfile

import numpy as np
import pytest
import soundfile

import repro.data as data
from repro.data import audio, images
from repro.data.errors import ChecksumMismatch, DataError


def planar(n: int, side: int, offset: int = 0) -> np.ndarray:
    """(n, 3*side*side) in CIFAR/ImageNet storage order with a value that encodes (image, channel, pixel)."""
    i, c, p = np.meshgrid(np.arange(n), np.arange(3), np.arange(side * side), indexing="ij")
    return ((offset + i * 7 + c * 50 + p) % 256).astype(np.uint8).reshape(n, -1)


def check_raster(rows: np.ndarray, stored: np.ndarray, side: int) -> None:
    """Pixel (r, c) channel k of the sequences equals the stored plane k at (r, c)."""
    for r, col, k in ((0, 0, 0), (0, 1, 2), (side - 1, side - 2, 1)):
        pos = (r * side + col) * 3 + k
        assert (rows[:, pos] == stored[:, k * side * side + r * side + col]).all()


@pytest.fixture
def cifar_tar(tmp_path, monkeypatch, pin):
    batches = {name: planar(4 if "data" in name else 3, 32, offset=j) for j, name in enumerate(images.CIFAR_MEMBERS)}
    tar_path = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        for name, arr in batches.items():
            raw = pickle.dumps({b"data": arr, b"labels": list(range(len(arr))), b"batch_label": b"x"})
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
            monkeypatch.setitem(images.CIFAR_MEMBERS, name, pin(raw, "md5").digest)
    monkeypatch.setattr(images, "CIFAR_PIN", pin(tar_path.read_bytes(), "md5"))
    monkeypatch.setattr(images, "CIFAR_VALID", 2)
    return tar_path, batches


def test_cifar10_raster_order_and_split(root, cifar_tar):
    tar_path, batches = cifar_tar
    data.prepare("cifar10", src=tar_path)
    train, vocab = data.open_split("cifar10", "train")
    valid, _ = data.open_split("cifar10", "valid")
    test, _ = data.open_split("cifar10", "test")
    assert train.shape == (18, 3072) and valid.shape == (2, 3072) and test.shape == (3, 3072)
    assert vocab.size == 256 and vocab.unit == "dim" and data.dataset_info("cifar10").shape == (32, 32, 3)
    check_raster(test, batches["cifar-10-batches-py/test_batch"], 32)
    stored = np.concatenate([batches[n] for n in list(images.CIFAR_MEMBERS)[:5]])
    mask = images.holdout(20, 2)
    check_raster(train, stored[~mask], 32)
    check_raster(valid, stored[mask], 32)


def test_cifar10_member_checksum_is_checked(root, cifar_tar, monkeypatch):
    monkeypatch.setitem(images.CIFAR_MEMBERS, "cifar-10-batches-py/data_batch_3", "0" * 32)
    with pytest.raises(ChecksumMismatch, match="data_batch_3: md5 .*, expected 0{32}"):
        data.prepare("cifar10", src=cifar_tar[0])


def test_cifar10_truncated_tarball(root, cifar_tar, tmp_path):
    cut = tmp_path / "cut.tar.gz"
    whole = cifar_tar[0].read_bytes()
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match="corrupt, truncated"):
        data.prepare("cifar10", src=cut, allow_unverified=True)
    assert not (root / "cifar10").exists()


def test_cifar10_refuses_pickled_code(root, tmp_path):
    with pytest.raises(DataError, match="not a CIFAR-10 batch"):
        images.cifar_batch("evil", pickle.dumps({b"data": print}))


def test_fashion_mnist_from_a_debian_like_tree(root, tmp_path, monkeypatch, releases):
    def idx(n):
        imgs = (np.arange(n * 784) % 256).astype(np.uint8)
        return np.array([2051, n, 28, 28], dtype=">u4").tobytes() + imgs.tobytes()

    tree = tmp_path / "fashion-mnist"
    tree.mkdir()
    train_raw, test_raw = idx(20), idx(5)
    (tree / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(train_raw))
    (tree / "t10k-images-idx3-ubyte").write_bytes(test_raw)
    releases("fashion-mnist", {"1.0-1": {"train-images-idx3-ubyte": train_raw, "t10k-images-idx3-ubyte": test_raw}})
    monkeypatch.setattr(images, "FASHION_VALID", 4)
    data.prepare("fashion-mnist", src=tree)
    shapes = [data.open_split("fashion-mnist", s)[0].shape for s in ("train", "valid", "test")]
    assert shapes == [(16, 784), (4, 784), (5, 784)]
    (tree / "t10k-images-idx3-ubyte").write_bytes(test_raw[:-1])
    with pytest.raises(ChecksumMismatch):
        data.prepare("fashion-mnist", src=tree)
    with pytest.raises(DataError, match="not an IDX image file"):
        data.prepare("fashion-mnist", src=tree, allow_unverified=True)


def tone(seconds: float, rate: int, channels: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    x = 0.5 * np.sin(2 * np.pi * 440 * t)
    return np.stack([x] * channels, axis=1)


@pytest.fixture
def music(tmp_path):
    d = tmp_path / "music"
    (d / "sub").mkdir(parents=True)
    soundfile.write(d / "a.wav", tone(0.5, 24_000, 2), 24_000)
    soundfile.write(d / "sub" / "b.flac", tone(0.25, 8_000, 1), 8_000)
    (d / "notes.txt").write_text("not audio")
    return d


def test_audio_folder_to_12khz_mu_law(root, music):
    data.prepare("audio", src=music)
    streams = [data.open_split("audio", s, seq_len=100)[0] for s in ("train", "valid", "test")]
    assert [s.size for s in streams] == [8_100, 400, 400]  # 0.75 s at 12 kHz = 9,000 samples, 90/5/5
    train, vocab = data.open_split("audio", "train", seq_len=2_000)
    assert train.shape == (4, 2_000) and vocab.size == 256 and vocab.unit == "sample"
    decoded = audio.mu_law_decode(train[0, 1000:1100])
    assert 0.45 < np.abs(decoded).max() < 0.55  # the 0.5-amplitude tone survives resampling + mu-law
    with pytest.raises(DataError, match="fewer than one sequence"):
        data.open_split("audio", "test", seq_len=1_000)
    with pytest.raises(DataError, match="seq_len must be"):
        data.open_split("audio", "test", seq_len="long")


def test_mu_law_round_trip():
    x = np.linspace(-1, 1, 1001)
    q = audio.mu_law(x)
    assert q.dtype == np.uint8 and q.min() == 0 and q.max() == 255 and audio.mu_law(np.zeros(1))[0] in (127, 128)
    err = np.abs(audio.mu_law_decode(q) - x)
    assert err.max() < 0.025 and err[np.abs(x) < 0.01].max() < 0.001  # fine steps near zero, coarse near +-1


def test_corrupt_audio_file_is_named(root, music):
    (music / "broken.wav").write_bytes(b"RIFF\x00\x00garbage")
    with pytest.raises(DataError, match="broken.wav: cannot decode audio"):
        data.prepare("audio", src=music)
    assert not (root / "audio").exists()


def test_moh_audio_checks_each_file(root, tmp_path, releases):
    d = tmp_path / "moh"
    d.mkdir()
    for i, name in enumerate(audio.MOH_FILES):
        soundfile.write(d / name, tone(0.1 * (i + 1), 8_000, 1), 8_000, subtype="PCM_16")
    releases("moh-audio", {"1.0-1": {name: (d / name).read_bytes() for name in audio.MOH_FILES}})
    data.prepare("moh-audio", src=d)
    assert data.open_split("moh-audio", "valid", seq_len=600)[0].shape == (1, 600)
    (d / audio.MOH_FILES[2]).write_bytes((d / audio.MOH_FILES[1]).read_bytes())
    with pytest.raises(ChecksumMismatch, match=audio.MOH_FILES[2]):
        data.prepare("moh-audio", src=d)
    (d / audio.MOH_FILES[2]).unlink()
    with pytest.raises(DataError, match=f"{audio.MOH_FILES[2]}: missing"):
        data.prepare("moh-audio", src=d)
