"""``repro sync``, ``pull`` and ``dashboard``: the store and W&B / trackio."""

from __future__ import annotations

from repro.cli.common import store_root
from repro.report import lookup


def cmd_sync(args) -> int:
    from repro.track.sync import sync  # Lightning (through repro.track.loggers)

    done = sync(store_root(args), args.entity, args.project)
    print(f"synced {len(done.synced)}, skipped {len(done.skipped)} already synced, failed {len(done.failed)}")
    return 1 if done.failed else 0


def cmd_pull(args) -> int:
    from repro.track.pull import describe, public_api, pull  # wandb, Lightning

    manifest = lookup.one(args.name, [], store_root(args))
    done = pull(manifest, store_root(args), public_api(args.entity, args.project), args.entity, args.project)
    print(describe(done))
    return 0


def cmd_dashboard(args) -> int:
    from repro.track import dashboard  # Lightning (through repro.track.loggers)

    root = store_root(args)
    name = lookup.one(args.name, [], root).name if args.name else None
    done = dashboard.import_runs(root, name)
    print(
        f"trackio project {dashboard.PROJECT!r} in {dashboard.trackio_dir(root)}: imported "
        f"{len(done.imported)} run(s), {len(done.present)} already there, {len(done.unfinished)} unfinished "
        "(imported once finished)",
        flush=True,
    )
    dashboard.serve(root, done.ids if name else [], args.port, args.host)
    return 0
