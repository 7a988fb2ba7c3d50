"""``repro report NAME --wandb``: a rendered report logged into the manifest's W&B group as a run of
job type ``report``: every figure as an image, the paper-vs-ours table, each renderer's table and the
claims with their verdicts as W&B tables.

Reads what ``repro.report.stage.render`` wrote (the report's markdown names its figures and tables) and
the claims it judged; logs nothing that the report does not show.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import wandb

from repro.config.manifest import Manifest
from repro.errors import UserError
from repro.store.provenance import code_version
from repro.track.loggers import PROJECT, wandb_dir

_IMAGE = re.compile(r"^!\[(?P<caption>[^\]]*)\]\((?P<path>[^)]+\.(?:png|jpg|jpeg|gif|svg))\)$", re.M)
_TABLE_CSV = re.compile(r"\[csv\]\((?P<path>[^)]+\.csv)\)")


def report_parts(report: Path) -> tuple[list[tuple[Path, str]], list[Path]]:
    """The figures (path, caption) and renderer tables (csv paths) a report's markdown links to."""
    text = report.read_text(encoding="utf-8")
    figures = [(report.parent / m["path"], m["caption"]) for m in _IMAGE.finditer(text)]
    tables = [report.parent / m["path"] for m in _TABLE_CSV.finditer(text)]
    return figures, tables


def claims_frame(results: list[Any]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "scale": r.scale,
                "claim": r.id,
                "text": r.text,
                "check": r.check,
                "verdict": r.status,
                "detail": r.verdict.detail,
            }
            for r in results
        ],
        columns=["scale", "claim", "text", "check", "verdict", "detail"],
    )


def log_report(manifest: Manifest, root: Path, report: Path, results: list[Any], mode: str) -> str:
    """Log the report as one W&B run; returns its W&B run id."""
    if mode == "disabled":
        raise UserError("--wandb: W&B is disabled (WANDB_MODE=disabled)")
    figures, tables = report_parts(report)
    wandb_dir(root).mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=PROJECT,
        group=manifest.name,
        job_type="report",
        name=f"report {manifest.name}",
        dir=str(root),
        mode=mode,
        tags=[manifest.paper, "report"],
        config={
            "manifest": manifest.name,
            "paper": manifest.paper,
            "title": manifest.title,
            "code_version": code_version(),
        },
    )
    try:
        logged: dict[str, Any] = {}
        for path, caption in figures:
            logged[f"figures/{path.stem}"] = wandb.Image(str(path), caption=caption)
        paper_vs_ours = report.with_suffix(".csv")
        if paper_vs_ours.exists():
            logged["tables/paper_vs_ours"] = wandb.Table(dataframe=pd.read_csv(paper_vs_ours))
        for path in tables:
            logged[f"tables/{path.stem}"] = wandb.Table(dataframe=pd.read_csv(path))
        logged["claims"] = wandb.Table(dataframe=claims_frame(results))
        run.log(logged)
        run.summary.update(
            {"claims_reproduced": sum(r.verdict.status == "reproduced" for r in results), "claims_judged": len(results)}
        )
    finally:
        run.finish()
    return run.id
