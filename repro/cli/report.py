"""``repro report`` and ``repro renderers``: tables, figures and verdicts from the stored runs; ``repro report``'s
command line parsed once into the session's request (:class:`repro.session.report.Request`)."""

from __future__ import annotations

from repro.claims.stats import CONFIDENCE
from repro.cli import options
from repro.cli.common import override_args
from repro.registry import Command
from repro.report import renderers
from repro.session import report as session


def cmd_report(args) -> int:
    asked = request(args)
    return session.report(asked)


def request(args) -> session.Request:
    """The command line as the session's :class:`~repro.session.report.Request`, parsed once."""
    return session.Request(
        name=args.name,
        overrides=tuple(override_args(args)),
        every=args.all,
        access=args.access,
        results=args.results,
        max_steps=args.max_steps,
        confidence=args.confidence,
        wandb=args.wandb,
    )


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
