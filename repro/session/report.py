"""``repro report``'s session, from what was asked to its exit status: the options checked together, then
either every manifest's report and ``REPORT.md`` over them (``--all``, the files no report links any more
removed after), or the selection made (:mod:`repro.plan.selection`), every manifest of it checked against
its renderers before any is written, and each one's report written (:mod:`repro.report.stage`) and printed.
:class:`Request` is what the command line asked, as plain values: ``repro/cli/report.py`` parses it once
and hands it over."""

from __future__ import annotations

from dataclasses import dataclass

from repro.claims.stats import CONFIDENCE
from repro.config import lookup
from repro.config.access import NONE, Access
from repro.errors import UserError
from repro.plan import selection
from repro.report import prune, renderers, stage
from repro.store.runs import results_root


@dataclass(frozen=True)
class Request:
    """What ``repro report`` was asked, each field an option's value (``name``: None with ``--all``;
    ``overrides``: the override arguments as the command line writes them, ``-m`` first when they sweep;
    ``results``: ``--results``, None for ``$REPRO_RESULTS`` or ``results``)."""

    name: str | None = None
    overrides: tuple[str, ...] = ()
    every: bool = False  # --all
    access: Access = NONE
    results: str | None = None
    max_steps: int | None = None
    confidence: float = CONFIDENCE
    wandb: bool = False


def report(request: Request) -> int:
    """``repro report``: check, then every report and REPORT.md (``--all``), or select and write each
    selected manifest's report, printed."""
    check(request)
    root = results_root(request.results)
    if request.every:
        path = stage.render_all(root, request.confidence, request.access, echo=print)
        print(f"wrote {path}")
        removed = prune.remove_unreferenced(root)
        if removed:
            print(f"removed {len(removed)} file(s) of reports/figures and reports/tables that no report references")
        return 0
    found = selection.select(request.name, list(request.overrides), root, request.access)
    chosen = lookup.with_parts(found, list(request.overrides)) if request.overrides else found
    for manifest in [renderers.check_loaded(m) for m in chosen]:  # every one checked before any is written
        path, results = stage.render(manifest, root, request.confidence, request.max_steps)
        print(path.read_text(encoding="utf-8"))
        print(f"wrote {path}")
        if request.wandb:
            from repro.track.loggers import resolve_mode  # Lightning and wandb
            from repro.track.wandb_report import log_report

            mode = resolve_mode(False)
            print(f"logged to W&B ({mode}) as run {log_report(manifest, root, path, results, mode)}")
    return 0


def check(request: Request) -> None:
    """One-line errors for options that do not fit together (before anything is written)."""
    if request.every and request.max_steps is not None:
        raise UserError(f"--max-steps {request.max_steps}: a capped report is one manifest's (name it), not --all's")
    if not request.every and not request.name:
        raise UserError("report: name a manifest or pass --all")
