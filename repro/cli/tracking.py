"""``repro sync``, ``pull`` and ``dashboard``: the store and W&B / trackio."""

from __future__ import annotations

from repro.cli.common import store_root
from repro.config import lookup
from repro.errors import UserError
from repro.plan.runs import stored


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
