"""Audio as byte sequences: mono, resampled to 12 kHz, 8-bit mu-law (mu = 255).

Files are decoded with soundfile (wav, flac, ogg), averaged to mono, resampled with a polyphase
filter, mu-law encoded, and concatenated in sorted path order into one stream that is split 90/5/5
by samples. :func:`repro.data.open_split` cuts each split into ``seq_len``-sample sequences.

The Sparse Transformer paper's classical-music corpus was never released; MAESTRO (piano recordings,
``--from`` its folder) is the public stand-in, and ``moh-audio`` (Debian ``asterisk-moh-opsound-wav``,
~18 minutes of real music recorded at 8 kHz) the offline one.
"""

from __future__ import annotations

from math import gcd
from pathlib import Path

import numpy as np
import soundfile

from repro.data import vocab as vocabs
from repro.data.debian import Package, Release
from repro.data.errors import DataError
from repro.data.fetch import Pin
from repro.data.job import Job
from repro.data.on_disk import save_array, split_bounds

RATE = 12_000
MU = 255
SEQ_LEN = 65_536  # the paper's audio sequence length
EXTENSIONS = (".wav", ".flac", ".ogg")


def mu_law(x: np.ndarray, mu: int = MU) -> np.ndarray:
    """Samples in [-1, 1] -> mu-law levels 0..mu (uint8)."""
    y = np.sign(x) * np.log1p(mu * np.abs(np.clip(x, -1, 1))) / np.log1p(mu)
    return np.rint((y + 1) / 2 * mu).astype(np.uint8)


def mu_law_decode(q: np.ndarray, mu: int = MU) -> np.ndarray:
    """Mu-law levels -> samples in [-1, 1] (the inverse of :func:`mu_law` up to quantisation)."""
    y = 2 * np.asarray(q, dtype=np.float64) / mu - 1
    return np.sign(y) * np.expm1(np.abs(y) * np.log1p(mu)) / mu


def load_mono(path: Path, rate: int = RATE) -> np.ndarray:
    """A file's samples as mono float32 at ``rate`` Hz."""
    try:
        x, sr = soundfile.read(path, dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as e:
        raise DataError(f"{path}: cannot decode audio ({e})") from None
    x = x.mean(axis=1)
    g = gcd(rate, sr)
    if sr == rate:
        return x
    from scipy.signal import resample_poly  # here: scipy takes seconds to import, and only this needs it

    return resample_poly(x, rate // g, sr // g).astype(np.float32)


def audio_files(src: Path) -> list[Path]:
    files = sorted(p for p in src.rglob("*") if p.suffix.lower() in EXTENSIONS and p.is_file())
    if not files:
        raise DataError(f"{src}: no {'/'.join(e[1:] for e in EXTENSIONS)} files found")
    return files


def save_audio(job: Job, files: list[Path], source: dict) -> dict:
    stream = np.concatenate([mu_law(load_mono(p)) for p in files])
    splits = {s: save_array(job.out, s, stream[a:b]) for s, (a, b) in split_bounds(len(stream)).items()}
    return {
        "vocab": vocabs.values(MU + 1, "sample").to_json(),
        "splits": splits,
        "rate": RATE,
        "seconds": round(len(stream) / RATE, 1),
        "source": {**source, "files": len(files)},
    }


def prepare_audio(job: Job) -> dict:
    return save_audio(job, audio_files(job.src), {"dir": str(job.src)})


MOH = Package(
    "asterisk-moh-opsound-wav",
    "usr/share/asterisk/moh",
    (
        Release(
            "2.03-1.1",
            Pin(13_969_212, "8f9d808a729d305c2d3343993f21ca5e6829e411682618dc8ea7aa8bc24a566c"),
            {
                # 8 kHz mono 16-bit PCM, 1,106.8 s in all
                "macroform-cold_day.wav": Pin(
                    3_908_426, "716048b9913498c5416ed2df0d28b562b5c8017c07a030e19bb119b96d905b92"
                ),
                "macroform-robot_dity.wav": Pin(
                    3_019_752, "018064be59d8830d495c948231aefa286369eaff9a289a112af09acf94b57445"
                ),
                "macroform-the_simplicity.wav": Pin(
                    4_464_220, "ce642e2f083a9d2df94b252476f6a339c93a59882838fce5d4dd6afbdcf2cef9"
                ),
                "manolo_camp-morning_coffee.wav": Pin(
                    1_169_586, "43540271262ebb37f5a760dea62686cc30dc379d85757a83f79b8bc0dce8bedb"
                ),
                "reno_project-system.wav": Pin(
                    5_147_816, "6eab497384d54844e064125625ae6e147973de6a4b1e58fad87cf5aa095fbf92"
                ),
            },
        ),
    ),
)
MOH_FILES = tuple(MOH.releases[0].content)


def prepare_moh_audio(job: Job) -> dict:
    files = [job.src / name for name in MOH_FILES]
    for path in files:
        if not path.exists():
            raise DataError(f"{path}: missing (not the {MOH.name} files?)")
        job.check_release(path.name, str(path), path)
    return save_audio(job, files, {})
