"""``repro list``, ``show`` and ``validate``: the manifests, their resolved runs, their checks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from repro.cli.common import at_scale, override_args, save, select, store_root
from repro.config import lookup
from repro.config import manifest as manifests
from repro.config.cells import value_text
from repro.console import print_table
from repro.errors import UserError
from repro.report import renderers
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
            m = lookup.load(path, args.access)
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
        (r["name"], r["title"] or "INVALID (below)", str(r.get("runs", "-")), str(r.get("finished", "-")))
        for r in records
    ]
    print_table([("manifest", "title", f"runs@{args.scale}", "finished"), *rows])
    for r in records:  # under the table, where a long message does not widen every row
        if r["title"] is None:
            print(f"INVALID {r['name']}: {r['error']}")
    return 0


# the columns every run has: header, the dotted key a grid or an override names it by, its value
FIXED = (
    ("seed", "train.seed", lambda s: s.train.seed),
    ("data", "data.label", lambda s: s.data.label),
    ("block", "data.block", lambda s: s.data.block),
    ("family", "model.family", lambda s: s.family),
    ("steps", "train.steps", lambda s: s.train.steps),
    ("batch", "train.batch_size", lambda s: s.train.batch_size),
)


def cmd_show(args) -> int:
    found = select(args)
    out = []
    for m in at_scale(lookup.with_parts(found, override_args(args)), args.scale):
        specs = m.expand(args.scale, seeds=args.seeds)
        keys = list(m.grid_for(args.scale))
        fixed = {key for _, key, _ in FIXED}
        # the grid's and the overrides' keys are columns too, once each (train.steps is the steps column)
        shown = [k for k in keys + [k for k in m.set if k not in keys] if k not in fixed]
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
                *(str(value(s)) for _, _, value in FIXED),
            )
            for s in specs
        ]
        print(f"{m.name}: {m.title} [scale {args.scale}]")
        print_table([("run_id", *shown, *(header for header, _, _ in FIXED)), *rows])
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    save(args, found)
    return 0


def _dotted(tree: dict, key: str):
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def cmd_validate(args) -> int:
    """Every manifest is checked: each failure is one ``error:`` line on stderr, exit status 2 if any."""
    paths = [Path(p) for p in args.paths] or list(manifests.discover().values())
    failed = 0
    for path in paths:
        try:
            # --renderers: its renderer files run, checked against what they register; else their source is read
            m = (
                renderers.check_loaded(manifests.load(path, args.access))
                if args.renderers
                else lookup.load(path, args.access)
            )
        except UserError as err:
            failed += 1
            print(f"error: {err}", file=sys.stderr, flush=True)
            continue
        code = f"  renderer files: {', '.join(map(str, m.analysis))}" if m.analysis else ""
        loaded = " (loaded)" if args.renderers else " (read, not run: --renderers loads them)"
        print(f"ok  {m.name}  ({path})  scales: {', '.join(m.scale_names())}{code}{loaded * bool(code)}", flush=True)
        for warning in m.claim_warnings():
            print(f"    warning: {warning}")
    if failed and len(paths) > 1:
        print(f"{failed} of {len(paths)} manifests invalid")
    return 2 if failed else 0
