"""``repro bench NAME``: run a benchmark and store its records under the results root."""

from __future__ import annotations

import json

from repro.cli.common import fmt, store_root
from repro.console import print_table
from repro.files import atomic

BENCHES = {"adaptive": "repro.bench.adaptive", "attention": "repro.bench.attention", "st-step": "repro.bench.st_step"}


def cmd_bench(args) -> int:
    records = args.bench_module.main(args)
    out = store_root(args) / "bench" / f"{args.bench}.json"
    atomic.write_text(out, json.dumps(records, indent=2) + "\n")
    if args.json:
        print(json.dumps(records, indent=2))
    elif records:
        cols = list(records[0])
        print_table([cols, *([fmt(r.get(c)) for c in cols] for r in records)])
        print(f"stored in {out}")
    return 0
