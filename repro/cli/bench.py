"""``repro bench NAME``: run a benchmark and store its records under the results root."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from repro import cpu_isa
from repro.bench import BENCHES
from repro.cli.common import fmt, store_root
from repro.console import print_table
from repro.errors import UserError
from repro.files import atomic
from repro.registry import Command
from repro.train import throughput


def cmd_bench(args) -> int:
    cpu_isa.choice()  # the workers' instruction set (REPRO_CPU_ISA), checked before anything runs
    out = target(store_root(args), args.bench, args.out, args.replace)  # before the benchmark runs
    records = args.bench_module.main(args)
    for rec in records:  # a training step's achieved model FLOP/s and MFU (docs/throughput.md)
        if "error" not in rec:
            rec.update(throughput.bench_fields(rec))
    atomic.write_text(out, json.dumps(records, indent=2) + "\n")
    if args.json:
        print(json.dumps(records, indent=2))
    elif records:
        cols = list(getattr(args.bench_module, "COLUMNS", None) or records[0])  # a bench may name what to print
        print_table([cols, *([fmt(r.get(c)) for c in cols] for r in records)])
        print(f"stored in {out}")
    return 0


def target(root: Path, bench: str, out: str | None, replace: bool) -> Path:
    """Where the records go: ``--out PATH``, else ``<results>/bench/<bench>.json``; an existing file (the
    stored record, committed with the suite) is replaced only with ``--replace``; without it, a new
    ``<bench>.<UTC time>.json`` beside it (or UserError for an existing ``--out``)."""
    path = Path(out) if out else root / "bench" / f"{bench}.json"
    if replace or not path.exists():
        return path
    if out:
        raise UserError(f"--out {out}: the file exists; pass --replace to replace it, or choose another path")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return path.with_name(f"{bench}.{stamp}.json")


def add_arguments(p, parents) -> None:
    """A subcommand per benchmark of :data:`repro.bench.BENCHES` whose module imports here (one that needs
    a library not installed is left out), with the options every benchmark takes and its own."""
    bench = p.add_subparsers(dest="bench", metavar="BENCH")
    for name, entry in BENCHES.items():
        try:
            mod = entry.load()
        except ImportError:
            continue
        q = bench.add_parser(
            name, parents=parents, help=(mod.__doc__ or "").strip().splitlines()[0] if mod.__doc__ else None
        )
        q.add_argument("--json", action="store_true", help="print the records as JSON")
        q.add_argument(
            "--out",
            metavar="PATH",
            default=None,
            help=f"write the records here (default: <results>/bench/{name}.json, or, when that file exists, "
            f"a new {name}.<UTC time>.json beside it)",
        )
        q.add_argument("--replace", action="store_true", help="replace an existing record file (the committed one)")
        mod.add_arguments(q)
        q.set_defaults(func=cmd_bench, bench_module=mod)


COMMAND = Command("bench", "benchmarks: " + ", ".join(BENCHES), add_arguments, None)
