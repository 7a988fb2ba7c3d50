"""``repro data``: list, prepare, verify and describe datasets. Thin: parses, calls the API, prints."""

from __future__ import annotations

import argparse
import time

from repro.console import print_table
from repro.data import api, catalog, on_disk
from repro.data.errors import CorruptData
from repro.data.text import FILE_KINDS
from repro.registry import Command

INTERRUPTED = (  # what Ctrl-C leaves of a preparation (repro.data.on_disk: a dataset appears only complete)
    "a dataset is stored only complete, so none was left half-prepared; the same command prepares it again"
)


def add_arguments(data: argparse.ArgumentParser, parents: list[argparse.ArgumentParser]) -> None:
    """The subcommands list/prepare/verify/info of ``repro data``; ``parents`` carry the options every
    command takes."""
    sub = data.add_subparsers(dest="data_command", required=True, metavar="{list,prepare,verify,info}")

    def command(name: str, handler, help: str, with_name: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, parents=list(parents))
        if with_name:
            p.add_argument("name", choices=catalog.names(), metavar="NAME", help=", ".join(catalog.names()))
        p.add_argument("--root", default=None, help="data root (default: $REPRO_DATA or ~/.cache/repro/data)")
        p.set_defaults(func=handler)
        return p

    command("list", cmd_list, "every dataset: kind, size, vocabulary, source, prepared or not", with_name=False)
    p = command("prepare", cmd_prepare, "download or read, verify, split and store a dataset")
    p.set_defaults(interrupted=INTERRUPTED)
    p.add_argument(
        "--from",
        dest="src",
        default=None,
        metavar="PATH",
        help="local archive, file or folder instead of the download / Debian files",
    )
    p.add_argument("--allow-unverified", action="store_true", help="accept sources whose size or hash differs")
    p.add_argument("--kind", choices=FILE_KINDS, default="bytes", help="for `file`: how to read it")
    for name, handler, help in (
        ("verify", cmd_verify, "re-hash the stored splits"),
        ("info", cmd_info, "details of one dataset"),
    ):
        p = command(name, handler, help)
        p.add_argument("--from", dest="src", default=None, metavar="PATH", help="for `file`: the file")
        p.add_argument("--kind", choices=FILE_KINDS, default="bytes", help="for `file`: how it was read")


def _file_options(args) -> dict:
    return {"path": args.src, "kind": args.kind} if args.name == "file" else {}


def _package(meta: dict) -> str | None:
    """ "NAME VERSION" of the Debian package a prepared dataset came from; None if not from one."""
    src = meta["source"]
    return f"{src['debian']} {src.get('version') or '(unknown version)'}" if "debian" in src else None


def cmd_list(args) -> int:
    rows = [["name", "kind", "size", "vocabulary", "source", "prepared"]]
    for name in catalog.names():
        info = catalog.get(name).info
        try:
            prepared = "-" if name in ("file", "synthetic") else ("yes" if api.is_prepared(name, args.root) else "no")
        except CorruptData as err:
            prepared = f"corrupt: {err}"
        rows.append([name, info.kind, info.size, info.vocab, info.source, prepared])
    print_table(rows)
    print(f"data root: {on_disk.data_root(args.root)}")
    return 0


def cmd_prepare(args) -> int:
    started = time.time()
    options = {"kind": args.kind} if args.name == "file" else {}
    target = api.prepare(args.name, src=args.src, root=args.root, allow_unverified=args.allow_unverified, **options)
    meta = on_disk.read_meta(target)
    sizes = ", ".join(f"{s} {'x'.join(map(str, meta['splits'][s]['shape']))}" for s in on_disk.SPLITS)
    origin = f" from Debian {_package(meta)}" if _package(meta) else ""
    print(f"prepared {args.name}{origin} in {time.time() - started:.1f} s -> {target} ({sizes})")
    if meta["unverified"]:
        print(f"warning: not verified: {', '.join(meta['unverified'])}")
    return 0


def cmd_verify(args) -> int:
    problems = api.verify(args.name, args.root, **_file_options(args))
    for p in problems:
        print(p)
    print(f"{args.name}: {'FAILED' if problems else 'ok'}")
    return 1 if problems else 0


def cmd_info(args) -> int:
    info = catalog.get(args.name).info
    rows = [
        ["name", info.name],
        ["kind", info.kind],
        ["description", info.description],
        ["source", info.source],
        ["unit", info.unit],
        ["vocabulary", info.vocab],
        ["size", info.size],
    ]
    if info.shape:
        rows.append(["shape", " x ".join(map(str, info.shape))])
    if args.name != "file" or args.src:
        directory = api.dataset_dir(args.name, args.root, **_file_options(args))
        meta = on_disk.read_meta(directory)
        rows.append(
            [
                "prepared",
                f"yes, {meta['prepared_at']} in {directory}"
                if meta
                else f"no: {api.prepare_command(args.name, args.root, **_file_options(args))}",
            ]
        )
        if meta:
            if _package(meta):
                rows.append(["package", f"Debian {_package(meta)}"])
            rows.append(["verified", "yes" if meta["verified"] else f"no: {', '.join(meta['unverified'])}"])
            rows += [
                [s, f"{' x '.join(map(str, meta['splits'][s]['shape']))} {meta['splits'][s]['dtype']}"]
                for s in on_disk.SPLITS
            ]
            rows.append(["vocab size", str(meta["vocab"]["size"])])
    print_table(rows)
    return 0


COMMAND = Command("data", "datasets: list, prepare, verify, info", add_arguments, None, description="")
