"""``repro list``, ``show`` and ``validate``: the manifests, their resolved runs, their checks."""

from __future__ import annotations

import json
from pathlib import Path

from repro.cli.common import override_args, save, select, store_root
from repro.config import manifest as manifests
from repro.config.cells import value_text
from repro.console import print_table
from repro.errors import UserError
from repro.report import lookup
from repro.store.runs import RunDir


def cmd_list(args) -> int:
    root = store_root(args)
    found = sorted(manifests.discover().items())
    if args.names:
        print("\n".join(name for name, _ in found))
        return 0
    records = []
    for name, path in found:
        try:
            m = lookup.load(path)
            specs = m.expand(args.scale) if args.scale in m.scale_names() else []
            done = sum(RunDir(root, m.name, s.run_id).finished for s in specs)
            records.append(
                {
                    "name": name,
                    "title": m.title,
                    "paper": m.paper,
                    "path": str(path),
                    "scales": m.scale_names(),
                    "runs": len(specs),
                    "finished": done,
                }
            )
        except UserError as err:
            records.append({"name": name, "title": None, "path": str(path), "error": str(err)})
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    rows = [
        (r["name"], r["title"] or f"INVALID: {r['error']}", str(r.get("runs", "-")), str(r.get("finished", "-")))
        for r in records
    ]
    print_table([("manifest", "title", f"runs@{args.scale}", "finished"), *rows])
    return 0


def cmd_show(args) -> int:
    found = select(args)
    out = []
    for m in lookup.with_parts(found, override_args(args)):
        specs = m.expand(args.scale)
        keys = list(m.grid_for(args.scale))
        shown = keys + [k for k in m.set if k not in keys]  # the overrides' keys are columns too
        if args.json:
            out.append(
                {
                    "manifest": m.name,
                    "title": m.title,
                    "scale": args.scale,
                    "command": m.command,
                    "runs": [{"run_id": s.run_id, "cell": s.cell, **s.resolved()} for s in specs],
                }
            )
            continue
        rows = [
            (
                s.run_id,
                *(value_text(s.cell[k] if k in s.cell else _dotted(s.resolved(), k)) for k in shown),
                s.data.label,
                str(s.data.block),
                s.family,
                str(s.train.steps),
                str(s.train.batch_size),
            )
            for s in specs
        ]
        print(f"{m.name}: {m.title} [scale {args.scale}]")
        print_table([("run_id", *shown, "data", "block", "family", "steps", "batch"), *rows])
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    save(args, found)
    return 0


def _dotted(tree: dict, key: str):
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def cmd_validate(args) -> int:
    paths = [Path(p) for p in args.paths] or list(manifests.discover().values())
    for path in paths:
        m = lookup.load(path, run_code=args.renderers)
        code = f"  renderer files: {', '.join(map(str, m.analysis))}" if m.analysis else ""
        loaded = " (loaded)" if args.renderers else " (read, not run: --renderers loads them)"
        print(f"ok  {m.name}  ({path})  scales: {', '.join(m.scale_names())}{code}{loaded * bool(code)}")
        for warning in m.claim_warnings():
            print(f"    warning: {warning}")
    return 0
