"""The ``repro`` command. Thin: parse, call the modules, print.

Exit status: 0 done; 1 a run failed, or a write failed (StoreError, one line); 2 bad input (UserError,
one line); 3 a run was skipped because another process trains it; 128 + N stopped by signal N
(``repro run``: 143 SIGTERM, 130 SIGINT, after checkpointing at a step boundary).
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from repro import manifest as manifests
from repro import signals
from repro.errors import StoreError, UserError
from repro.store import CorruptFile, RunDir, results_root, scan

BENCHES = {"adaptive": "repro.bench.adaptive", "attention": "repro.bench.attention"}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except StoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except signals.Interrupted as err:
        print(f"interrupted by {err.name}: {err.detail or 'no run was training'}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("interrupted: finished runs are stored; an unfinished run resumes from its last checkpoint",
              file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="repro", description=__doc__)
    parser.add_argument("--results", default=None, help="results root (default: $REPRO_RESULTS or results/)")
    sub = parser.add_subparsers(dest="command")

    p = sub.add_parser("list", help="every manifest: title, runs, finished")
    p.add_argument("--scale", default="tiny")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="the resolved runs of a manifest")
    p.add_argument("name")
    p.add_argument("--scale", default="tiny")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("validate", help="check manifests (all when no path is given)")
    p.add_argument("paths", nargs="*")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="train every run of a manifest (finished runs are skipped)")
    p.add_argument("name")
    p.add_argument("--scale", default="tiny")
    p.add_argument("--only", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--no-wandb", action="store_true")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("status", help="stored runs and their state")
    p.add_argument("name", nargs="?")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("report", help="regenerate a manifest's tables/figures and judge its claims")
    p.add_argument("name", nargs="?")
    p.add_argument("--all", action="store_true")
    p.add_argument("--wandb", action="store_true", help="also log the report into the manifest's W&B group")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("sync", help="upload offline W&B runs not uploaded yet (needs W&B credentials)")
    p.add_argument("--entity", default=None)
    p.add_argument("--project", default=None)
    p.set_defaults(func=cmd_sync)

    p = sub.add_parser("pull", help="bring a manifest's runs from its W&B group into the store")
    p.add_argument("name")
    p.add_argument("--entity", default=None)
    p.add_argument("--project", default=None, help="W&B project (default: $REPRO_WANDB_PROJECT or repro)")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("dashboard", help="compare stored runs in a local web page (trackio; no account)")
    p.add_argument("name", nargs="?", help="a manifest: import only its runs and open on them")
    p.add_argument("--port", type=int, default=None, help="default: the first free port from 7860")
    p.add_argument("--host", default=None, help="default 127.0.0.1 (0.0.0.0 to serve the network)")
    p.set_defaults(func=cmd_dashboard)

    p = sub.add_parser("sample", help="generate from a stored run (text, image grid or audio)")
    p.add_argument("run", help="run id (or unique prefix) or run directory")
    p.add_argument("--n", type=int, default=4, help="number of samples")
    p.add_argument("--length", type=int, default=None, help="symbols per sample (default: the block)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--prompt", default=None, help="text to continue (text runs)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("bench", help="benchmarks: " + ", ".join(BENCHES))
    bench = p.add_subparsers(dest="bench")
    for name, module in BENCHES.items():
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        q = bench.add_parser(name, help=(mod.__doc__ or "").strip().splitlines()[0] if mod.__doc__ else None)
        q.add_argument("--json", action="store_true", help="print the records as JSON")
        mod.add_arguments(q)
        q.set_defaults(func=cmd_bench, bench_module=mod)

    from repro.data import cli as data_cli

    data_cli.register(sub)
    return parser


def _root(args) -> Path:
    return results_root(args.results)


def cmd_list(args) -> int:
    root = _root(args)
    rows = []
    for name, path in sorted(manifests.discover().items()):
        try:
            m = manifests.load(path)
            specs = m.expand(args.scale) if args.scale in m.scale_names() else []
            done = sum(RunDir(root, m.name, s.run_id).finished for s in specs)
            rows.append((name, m.title, str(len(specs)), str(done)))
        except UserError as err:
            rows.append((name, f"INVALID: {err}", "-", "-"))
    _print_table(("manifest", "title", f"runs@{args.scale}", "finished"), rows)
    return 0


def cmd_show(args) -> int:
    m = manifests.resolve(args.name)
    specs = m.expand(args.scale)
    keys = list(m.grid_for(args.scale))
    rows = [(s.run_id, *(str(s.cell[k]) for k in keys), s.data.label, str(s.data.block), s.family,
             str(s.train.steps), str(s.train.batch_size)) for s in specs]
    print(f"{m.name}: {m.title} [scale {args.scale}]")
    _print_table(("run_id", *keys, "data", "block", "family", "steps", "batch"), rows)
    return 0


def cmd_validate(args) -> int:
    paths = [Path(p) for p in args.paths] or list(manifests.discover().values())
    for path in paths:
        m = manifests.load(path)
        print(f"ok  {m.name}  ({path})  scales: {', '.join(m.scale_names())}")
    return 0


def cmd_run(args) -> int:
    from repro import runner
    from repro.tracking import resolve_mode

    signals.install()
    if args.devices < 1:
        raise UserError(f"--devices {args.devices}: allowed: a positive number of devices")
    m = manifests.resolve(args.name)
    if m.base is None:
        print(f"{m.name} trains nothing; `repro report {m.name}` draws it")
        return 0
    specs = [runner.with_max_steps(s, args.max_steps) for s in runner.select(m.expand(args.scale), args.only)]
    root = _root(args)
    if args.dry_run:
        for s in specs:
            try:
                state = RunDir(root, m.name, s.run_id).summary().get("status", "to run")
            except CorruptFile:
                state = "corrupt summary: redone by run"
            print(f"{s.run_id}  {s.cell_name}  [{state}]")
        return 0
    mode = resolve_mode(args.no_wandb)
    failed = busy = 0
    for i, spec in enumerate(specs, 1):
        print(f"[{i}/{len(specs)}] {m.name} {spec.cell_name} ({spec.run_id}, scale {spec.scale}, "
              f"data {spec.data.label})", flush=True)
        outcome = runner.run_spec(spec, m, root, devices=args.devices, wandb_mode=mode)
        s = outcome.summary
        if outcome.status in ("failed", "busy"):
            failed += outcome.status == "failed"
            busy += outcome.status == "busy"
            continue
        scores = " / ".join(f"{split} {s[f'{split}_bits']:.4f}" for split in spec.eval.splits if f"{split}_bits" in s)
        print(f"  {outcome.status}: {scores or 'no split scored'} bits per {s.get('dataset_unit', 'symbol')} "
              f"on {s.get('dataset')}", flush=True)
    return 1 if failed else 3 if busy else 0


def cmd_status(args) -> int:
    root = _root(args)
    runs, corrupt = scan(root, manifests.resolve(args.name).name if args.name else None)
    if runs.empty and not corrupt:
        print(f"no stored runs under {root}/runs")
        return 0
    if not runs.empty:
        cols = [c for c in ("manifest", "run_id", "scale", "status", "steps", "valid_bits", "test_bits") if c in runs]
        _print_table(cols, [tuple(_fmt(r[c]) for c in cols) for _, r in runs.iterrows()])
    for line in corrupt:
        print(f"corrupt: {line}")
    return 0


def cmd_report(args) -> int:
    from repro import report

    root = _root(args)
    if args.all:
        print(f"wrote {report.render_all(root)}")
        return 0
    if not args.name:
        raise UserError("report: name a manifest or pass --all")
    manifest = manifests.resolve(args.name)
    path, results = report.render(manifest, root)
    print(path.read_text())
    print(f"wrote {path}")
    if args.wandb:
        from repro.tracking import resolve_mode
        from repro.wandb_report import log_report

        mode = resolve_mode(False)
        print(f"logged to W&B ({mode}) as run {log_report(manifest, root, path, results, mode)}")
    return 0


def cmd_sync(args) -> int:
    from repro.sync import sync

    done = sync(_root(args), args.entity, args.project)
    print(f"synced {len(done.synced)}, skipped {len(done.skipped)} already synced, failed {len(done.failed)}")
    return 1 if done.failed else 0


def cmd_pull(args) -> int:
    from repro.pull import describe, public_api, pull

    manifest = manifests.resolve(args.name)
    done = pull(manifest, _root(args), public_api(args.entity, args.project), args.entity, args.project)
    print(describe(done))
    return 0


def cmd_dashboard(args) -> int:
    from repro import dashboard

    root = _root(args)
    name = manifests.resolve(args.name).name if args.name else None
    done = dashboard.import_runs(root, name)
    print(f"trackio project {dashboard.PROJECT!r} in {dashboard.trackio_dir(root)}: imported "
          f"{len(done.imported)} run(s), {len(done.present)} already there, {len(done.unfinished)} unfinished "
          "(imported once finished)", flush=True)
    dashboard.serve(root, done.ids if name else [], args.port, args.host)
    return 0


def cmd_sample(args) -> int:
    import torch

    from repro import runner, sampling

    run = runner.find_run(_root(args), args.run)
    model, spec, vocab, info = runner.load_trained(run)
    prompt = vocab.encode(args.prompt) if args.prompt else None
    room = spec.data.block - (len(prompt) if prompt is not None else 1) + 1
    length = min(args.length or room, room)
    generator = torch.Generator().manual_seed(args.seed)
    samples = sampling.sample(model, vocab.size, args.n, length, temperature=args.temperature,
                              prompt=prompt, generator=generator)
    for path in sampling.write_samples(samples, vocab, info, run.path / "samples", f"seed{args.seed}"):
        print(f"wrote {path}")
    if info.kind == "text":
        print(vocab.decode(samples[0].numpy()))
    return 0


def cmd_bench(args) -> int:
    from repro.store import write_atomic

    records = args.bench_module.main(args)
    out = _root(args) / "bench" / f"{args.bench}.json"
    write_atomic(out, json.dumps(records, indent=2) + "\n")
    if args.json:
        print(json.dumps(records, indent=2))
    elif records:
        cols = list(records[0])
        _print_table(cols, [tuple(_fmt(r.get(c)) for c in cols) for r in records])
        print(f"stored in {out}")
    return 0


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _print_table(header, rows) -> None:
    rows = [tuple(map(str, r)) for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    sys.exit(main())
