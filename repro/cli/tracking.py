"""``repro sync``, ``pull`` and ``dashboard``: the store and W&B / trackio."""

from __future__ import annotations

from repro.cli.common import store_root
from repro.config import lookup
from repro.config.manifest import DEFAULT_SCALE
from repro.errors import UserError
from repro.plan.runs import stored
from repro.registry import Command


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
    from repro.track import dashboard  # Lightning (through repro.track.loggers)

    root = store_root(args)
    name = lookup.one(args.name, [], stored(root), args.access).name if args.name else None
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


def _wandb_arguments(p, parents=()) -> None:
    p.add_argument("--entity", default=None, help="W&B entity (default: your login's)")
    p.add_argument("--project", default=None, help="W&B project (default: $REPRO_WANDB_PROJECT or repro)")


def _pull_arguments(p, parents) -> None:
    p.add_argument("name", help="a manifest (name or path)")
    _wandb_arguments(p)


def _dashboard_arguments(p, parents) -> None:
    p.add_argument("name", nargs="?", help="a manifest: import only its runs and open on them")
    p.add_argument("--scale", default=DEFAULT_SCALE, help="the scale to open on (one project per scale)")
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
    "compare stored runs in a local web page (trackio; no account)",
    _dashboard_arguments,
    cmd_dashboard,
)
