"""``repro sync``, ``pull`` and ``dashboard``: the store and W&B / trackio."""

from __future__ import annotations

from pathlib import Path

from repro.cli.common import store_root
from repro.config import lookup
from repro.config.manifest import DEFAULT_SCALE
from repro.errors import UserError
from repro.files import atomic
from repro.plan.selection import at_scale, stored
from repro.registry import Command
from repro.store.runs import table


def cmd_sync(args) -> int:
    from repro.track.sync import sync  # Lightning (through repro.track.loggers)

    done = sync(store_root(args), args.entity, args.project)
    print(f"synced {len(done.synced)}, skipped {len(done.skipped)} already synced, failed {len(done.failed)}")
    return 1 if done.failed else 0


def cmd_pull(args) -> int:
    from repro.track.pull import describe, public_api, pull  # wandb, Lightning

    manifest = lookup.one(args.name, [], stored(store_root(args)), args.access)
    done = pull(manifest, store_root(args), public_api(args.entity, args.project), args.entity, args.project)
    print(describe(done))
    return 0


def cmd_dashboard(args) -> int:
    if args.static:
        return _static_page(args)
    if args.out is not None:
        raise UserError("--out: only with --static (the trackio dashboard is served, not written)")
    if len(args.names) > 1:
        raise UserError(
            f"dashboard: {len(args.names)} manifests named ({', '.join(args.names)}); the trackio dashboard "
            "opens on one: name one, or pass --static to compare several"
        )
    from repro.track import dashboard  # Lightning (through repro.track.loggers)

    root = store_root(args)
    name = lookup.one(args.names[0], [], stored(root), args.access).name if args.names else None
    done = dashboard.import_runs(root, name, args.access)
    print(
        f"trackio in {dashboard.trackio_dir(root)}: imported {len(done.imported)} run(s), "
        f"{len(done.present)} already there, {len(done.unfinished)} unfinished (imported once finished)",
        flush=True,
    )
    scales = sorted(set(done.scales.values()))
    if args.scale not in scales:
        raise UserError(
            f"no finished run{' of ' + name if name else ''} at scale {args.scale!r} to show "
            f"(finished at: {', '.join(scales) or 'none'}); pass --scale"
        )
    others = [dashboard.project(s) for s in scales if s != args.scale]
    print(
        f"project {dashboard.project(args.scale)!r} ({len(done.ids(args.scale))} run(s) shown)"
        + (f"; other scales in the Project menu: {', '.join(others)}" if others else ""),
        flush=True,
    )
    shown = done.ids(args.scale)
    dashboard.serve(root, args.scale, shown if name else [], len(shown), args.port, args.host)
    return 0


def _static_page(args) -> int:
    """``--static``: the named manifests (every one with stored runs) compared in one HTML file."""
    from repro.track import static_page  # pandas

    if args.port is not None or args.host is not None:
        raise UserError("--port/--host: not with --static (the static page is a file, not served)")
    root = store_root(args)
    known = stored(root)
    if args.names:
        chosen = lookup.with_parts([m for n in args.names for m in lookup.select(n, [], known, args.access)], [])
    else:
        runs = table(root)
        chosen = []
        for name in sorted(set(runs["manifest"])) if not runs.empty else []:
            try:
                chosen.append(lookup.one(name, [], known, args.access))
            except UserError as err:  # a stored manifest that no longer resolves: the others are shown
                print(f"left out: {err}", flush=True)
    panels, absent = [], []
    for manifest in at_scale(chosen, args.scale):
        shown = static_page.panel(manifest, root, args.scale)
        if shown:
            panels.append(shown)
        else:
            absent.append(manifest.name)
    if not panels:
        scales = sorted({str(s) for m in chosen for s in table(root, m.name).get("scale", [])})
        raise UserError(
            f"no run of {', '.join(args.names) or 'the store'} at scale {args.scale!r} to compare "
            f"(stored at: {', '.join(scales) or 'none'}); pass --scale"
        )
    out = Path(args.out) if args.out else root / "dashboard.html"
    atomic.write_text(out, static_page.page(panels, args.scale, absent))
    cells = sum(len(p.cells) for p in panels)
    print(f"wrote {out}: {len(panels)} manifest(s), {cells} cell(s) at scale {args.scale}", flush=True)
    return 0


def _wandb_arguments(p, parents=()) -> None:
    p.add_argument("--entity", default=None, help="W&B entity (default: your login's)")
    p.add_argument("--project", default=None, help="W&B project (default: $REPRO_WANDB_PROJECT or repro)")


def _pull_arguments(p, parents) -> None:
    p.add_argument("name", help="a manifest (name or path)")
    _wandb_arguments(p)


def _dashboard_arguments(p, parents) -> None:
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="a manifest: import only its runs and open on them (--static: manifests or groups, default every "
        "one with stored runs)",
    )
    p.add_argument("--scale", default=DEFAULT_SCALE, help="the scale to show (trackio: one project per scale)")
    p.add_argument(
        "--static",
        action="store_true",
        help="write one self-contained HTML page instead of serving trackio: per manifest, each cell's seed "
        "mean ± sd of test bits, and its curves",
    )
    p.add_argument("--out", default=None, metavar="PATH", help="--static: the file (default <results>/dashboard.html)")
    p.add_argument("--port", type=int, default=None, help="default: the first free port from 7860")
    p.add_argument("--host", default=None, help="default 127.0.0.1 (0.0.0.0 to serve the network)")


SYNC = Command(
    "sync",
    "upload offline W&B runs not uploaded yet (needs W&B credentials)",
    _wandb_arguments,
    cmd_sync,
)
PULL = Command("pull", "bring a manifest's runs from its W&B group into the store", _pull_arguments, cmd_pull)
DASHBOARD = Command(
    "dashboard",
    "compare stored runs in a local web page (trackio; no account), or --static in one HTML file",
    _dashboard_arguments,
    cmd_dashboard,
)
