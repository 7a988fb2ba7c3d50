"""``repro report`` and ``repro renderers``: tables, figures and verdicts from the stored runs."""

from __future__ import annotations

from repro.claims.stats import CONFIDENCE
from repro.cli import options
from repro.cli.common import override_args, select, store_root
from repro.config import lookup
from repro.errors import UserError
from repro.registry import Command
from repro.report import prune, renderers
from repro.report import stage as report


def cmd_report(args) -> int:
    root = store_root(args)
    if args.all and args.max_steps is not None:
        raise UserError(f"--max-steps {args.max_steps}: a capped report is one manifest's (name it), not --all's")
    if args.all:
        print(f"wrote {report.render_all(root, args.confidence, args.access, echo=print)}")
        removed = prune.remove_unreferenced(root)
        if removed:
            print(f"removed {len(removed)} file(s) of reports/figures and reports/tables that no report references")
        return 0
    if not args.name:
        raise UserError("report: name a manifest or pass --all")
    found = select(args)
    chosen = lookup.with_parts(found, override_args(args)) if override_args(args) else found
    for manifest in [renderers.check_loaded(m) for m in chosen]:  # every one checked before any is written
        path, results = report.render(manifest, root, args.confidence, args.max_steps)
        print(path.read_text(encoding="utf-8"))
        print(f"wrote {path}")
        if args.wandb:
            from repro.track.loggers import resolve_mode  # Lightning and wandb
            from repro.track.wandb_report import log_report

            mode = resolve_mode(False)
            print(f"logged to W&B ({mode}) as run {log_report(manifest, root, path, results, mode)}")
    return 0


def cmd_renderers(args) -> int:
    for r in renderers.describe():
        print(f"{r['name']}: {r['draws']}")
        print(f"    reads: {', '.join(r['reads']) or 'nothing from the runs'}")
        if r["reference"]:
            print(f"    reference: {', '.join(f'{k} ({t})' for k, t in r['reference'].items())}")
    return 0


def _report_arguments(p, parents) -> None:
    options.manifest_args(p, scale=False, optional="a manifest or group (or --all)")
    p.add_argument("--all", action="store_true", help="every manifest, and results/REPORT.md over them")
    p.add_argument("--wandb", action="store_true", help="also log the report into the manifest's W&B group")
    p.add_argument(
        "--max-steps",
        type=options.positive("steps"),
        default=None,
        metavar="N",
        help="report the runs `repro run --max-steps N` trained instead, labelled capped (a page of its own: "
        "reports/NAME-cappedN.md)",
    )
    p.add_argument(
        "--confidence",
        type=options.confidence,
        default=CONFIDENCE,
        help=f"the confidence level of the verdicts' t intervals (default {CONFIDENCE})",
    )


def _no_arguments(p, parents) -> None:
    """``repro renderers`` takes none but the options every command takes."""


REPORT = Command("report", "regenerate a manifest's tables/figures and judge its claims", _report_arguments, cmd_report)
RENDERERS = Command(
    "renderers",
    "every renderer: what it draws, the summary and reference keys it reads",
    _no_arguments,
    cmd_renderers,
)
