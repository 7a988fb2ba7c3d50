"""``repro list``, ``show`` and ``validate``: the manifests, their resolved runs, their checks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from repro.cli import options
from repro.cli.common import override_args, select, store_root
from repro.config import lookup
from repro.config import manifest as manifests
from repro.config.cells import value_text
from repro.config.document import SCALES
from repro.config.manifest import DEFAULT_SCALE
from repro.console import print_table
from repro.errors import UserError
from repro.plan import selection
from repro.registry import Command
from repro.report import renderers
from repro.store.runs import RunDir, short_names


def cmd_list(args) -> int:
    """Every manifest with its runs and how many are finished: at ``--scale S``, or (without it) at each
    scale that any manifest has finished runs at, and the default scale (``finished/runs``, ``-`` where
    a manifest has no such scale): the cpu-only pilots are counted at cpu, not read as "0 0" at tiny."""
    root = store_root(args)
    found = sorted(manifests.discover().items())
    if args.names:
        print("\n".join(name for name, _ in found))
        return 0
    records = []
    for name, path in found:
        try:
            m = lookup.load(path, args.access)
            counts = {scale: _counted(m, scale, root) for scale in m.scale_names()}
            here = counts.get(args.scale or DEFAULT_SCALE, {"runs": 0, "finished": 0})
            records.append(
                {
                    "name": name,
                    "title": m.title,
                    "paper": m.paper,
                    "path": str(path),
                    "scales": m.scale_names(),
                    **here,
                    "by_scale": counts,
                }
            )
        except UserError as err:
            records.append({"name": name, "title": None, "path": str(path), "error": str(err)})
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    if args.scale:
        shown = [args.scale]
        header = ("manifest", "title", f"runs@{args.scale}", "finished")
    else:
        trained = {s for r in records for s, c in r.get("by_scale", {}).items() if c["finished"]}
        named = [s for r in records for s in r.get("scales", [])]
        shown = [s for s in dict.fromkeys([*SCALES, *named]) if s in trained or s == DEFAULT_SCALE]
        header = ("manifest", "title", *(f"{s} (finished/runs)" for s in shown))
    rows = [(r["name"], r["title"] or "INVALID (below)", *_cells(r, shown, bool(args.scale))) for r in records]
    print_table([header, *rows])
    for r in records:  # under the table, where a long message does not widen every row
        if r["title"] is None:
            print(f"INVALID {r['name']}: {r['error']}")
    if not args.scale:
        rest = [s for s in dict.fromkeys(s for r in records for s in r.get("scales", [])) if s not in shown]
        if rest:
            print(f"no finished run at {', '.join(rest)}; `repro list --scale S` counts one scale's runs")
    return 0


def _counted(m, scale: str, root: Path) -> dict[str, int]:
    """A manifest's runs at ``scale`` and how many of them are finished under ``root``."""
    specs = m.expand(scale)
    return {"runs": len(specs), "finished": sum(RunDir(root, m.name, s.run_id).finished for s in specs)}


def _cells(record: dict, scales: list[str], one: bool) -> list[str]:
    """A manifest's row: at one ``--scale``, its runs and finished apart; else ``finished/runs`` a scale."""
    counts = record.get("by_scale")
    if counts is None:  # invalid: nothing counted
        return ["-"] * (2 if one else len(scales))
    if one:
        got = counts.get(scales[0], {"runs": 0, "finished": 0})
        return [str(got["runs"]), str(got["finished"])]
    return [f"{counts[s]['finished']}/{counts[s]['runs']}" if s in counts else "-" for s in scales]


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
    """A manifest's runs at a scale: the grid's and the overrides' keys, the resolved keys that tell its
    runs apart beyond those (a ``variant`` sets several: layers, S, ...), the fixed columns, and each
    run's state in the store (finished, to run, ...)."""
    found = select(args)
    root = store_root(args)
    out = []
    for m in selection.at_scale(lookup.with_parts(found, override_args(args)), args.scale):
        specs = m.expand(args.scale, seeds=args.seeds)
        keys = list(m.grid_for(args.scale))
        fixed = {key for _, key, _ in FIXED}
        # the grid's and the overrides' keys are columns too, once each (train.steps is the steps column)
        shown = [k for k in keys + [k for k in m.set if k not in keys] if k not in fixed]
        apart = _differing(specs, {*shown, *fixed, "train.seed"})
        states = [_state(RunDir(root, m.name, s.run_id)) for s in specs]
        if args.json:
            out.append(
                {
                    "manifest": m.name,
                    "title": m.title,
                    "scale": args.scale,
                    "command": m.command,
                    "runs": [
                        {"run_id": s.run_id, "cell": s.cell, "state": state, **s.resolved()}
                        for s, state in zip(specs, states)
                    ],
                }
            )
            continue
        rows = [
            (
                s.run_id,
                *(value_text(s.cell[k] if k in s.cell else _dotted(s.resolved(), k)) for k in shown),
                *(value_text(_dotted(s.resolved(), k)) for k in apart),
                *(str(value(s)) for _, _, value in FIXED),
                state,
            )
            for s, state in zip(specs, states)
        ]
        names = short_names(apart)
        done = states.count("finished")
        print(f"{m.name}: {m.title} [scale {args.scale}; {done} of {len(specs)} finished under {root}/]")
        print_table([("run_id", *shown, *(names[k] for k in apart), *(h for h, _, _ in FIXED), "state"), *rows])
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    selection.save(found, args.save)
    return 0


def _state(run: RunDir) -> str:
    """A run's state as ``repro status`` names it; ``unreadable`` where its folder cannot be read."""
    try:
        return run.state().status
    except OSError as err:
        return f"unreadable ({err.strerror or type(err).__name__})"


def _differing(specs: list, skip: set[str]) -> list[str]:
    """The resolved keys (dotted, leaves) whose values differ between ``specs``, in spec order, less
    ``skip``: what tells their grid cells apart where a ``variant`` sets several keys at once."""
    flat = [dict(_leaves(s.resolved())) for s in specs]
    keys = dict.fromkeys(k for f in flat for k in f)
    return [k for k in keys if k not in skip and len({repr(f.get(k)) for f in flat}) > 1]


def _leaves(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


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


def _list_arguments(p, parents) -> None:
    p.add_argument(
        "--scale",
        default=None,
        help="count the runs at this scale only (default: every scale with finished runs, and tiny)",
    )
    p.add_argument("--json", action="store_true", help="print JSON (one object per manifest)")
    p.add_argument("--names", action="store_true", help="print only the names (for shell completion)")


def _show_arguments(p, parents) -> None:
    options.manifest_args(p)
    options.seeds_arg(p, "show")
    p.add_argument("--json", action="store_true", help="print JSON, each run with its resolved spec")
    p.add_argument("--save", metavar="PATH", default=None, help=options.SAVE_HELP)


def _validate_arguments(p, parents) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="manifest files (default: every discovered manifest)")
    p.add_argument(
        "--renderers", action="store_true", help="also load the manifests' own renderer files (runs their code)"
    )


LIST = Command(
    "list", "every manifest: title, its finished and total runs at each trained scale", _list_arguments, cmd_list
)
SHOW = Command("show", "the resolved runs of a manifest (or a group) as a table", _show_arguments, cmd_show)
VALIDATE = Command(
    "validate",
    "check manifests (every one under experiments/, local/ included, when no path is given)",
    _validate_arguments,
    cmd_validate,
)
