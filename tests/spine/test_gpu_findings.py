"""scripts/gpu_findings.py runs end to end in its dry mode (CPU, toy sizes, the offline tiny corpus), so the
campaign for a lent GPU cannot rot before one is lent; without its corpus it refuses in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_findings.py"


def _script(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env},
        timeout=900,
    )


def test_the_campaign_dry_run_stores_its_cells_at_the_gpu10_scale_and_reports_them(tmp_path):
    proc = _script("--dry-run", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summaries = [json.loads(p.read_text()) for p in sorted((tmp_path / "runs").glob("*/*/summary.json"))]
    assert len(summaries) == 4 and {s["scale"] for s in summaries} == {"gpu10"}
    assert all(s["status"] == "finished" for s in summaries)
    cells = sorted((s["manifest"].split(".")[0], s["cell"].get("model.span.kind", "-")) for s in summaries)
    assert cells == [("as-fig3", "fixed")] * 3 + [("as-fig4", "-")]
    assert len(list((tmp_path / "reports").glob("as-fig3*.md"))) == 3 and list(
        (tmp_path / "reports").glob("as-fig4*.md")
    )


def test_the_campaign_refuses_without_its_corpus_in_one_line(tmp_path):
    proc = _script("--results", str(tmp_path / "results"), REPRO_DATA=str(tmp_path / "data"))
    assert proc.returncode == 2 and not (tmp_path / "results").exists()
    (line,) = proc.stderr.strip().splitlines()
    assert "linux-doc" in line and "REPRO_DATA" in line
