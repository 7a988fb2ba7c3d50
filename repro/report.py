"""Reports: a manifest's stored runs beside the paper's numbers, its figures, and its claims judged.

``results/reports/<manifest>.md`` (+ ``.csv``) per manifest and ``results/REPORT.md`` over all of them.
Reads only the run store (and the manifest for the paper's reference values and claims).

Reference values meet runs through ``reference.runs``: a list of ``{match: {key: value}, label, <metric>:
value}``; a run takes the first entry whose ``match`` its grid cell satisfies (keys may be dotted
suffixes, an empty match fits every run) and shows ``paper <metric>`` beside its own ``<metric>``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from repro import analysis, claims
from repro.analysis import markdown_table
from repro.manifest import Manifest, discover, load
from repro.store import table, write_atomic

COLUMNS = ["status", "dataset", "valid_bits", "test_bits", "params", "flops_per_token", "avg_span",
           "seconds_per_step", "peak_memory_bytes", "steps"]
SCALE_NOTE = {
    "tiny": "**Scale: tiny** (2 CPU cores, minutes per run, offline stand-in corpora). These are NOT the "
            "paper's numbers and are not comparable to them in absolute terms; only qualitative findings "
            "are checked.",
    "small": "**Scale: small** (one GPU or a long CPU run). Smaller than the paper's models; absolute "
             "numbers are not the paper's.",
    "paper": "**Scale: paper** (the paper's configuration).",
}


@dataclass
class ClaimResult:
    manifest: str
    scale: str
    id: str
    text: str
    check: str
    verdict: claims.Verdict


def cell_keys(manifest: Manifest, scale: str) -> list[str]:
    return list(manifest.grid_for(scale))


def reference_for(manifest: Manifest, cell: dict[str, Any]) -> dict[str, Any]:
    for entry in manifest.reference.get("runs") or []:
        match = entry.get("match") or {}
        if all(any(str(v) == str(cell[c]) for c in cell if c == k or c.endswith("." + k)) for k, v in match.items()):
            return {k: v for k, v in entry.items() if k != "match"}
    return {}


def render(manifest: Manifest, root: Path) -> tuple[Path, list[ClaimResult]]:
    """Write the manifest's report; returns its path and the claims judged at every stored scale."""
    runs = table(root, manifest.name)
    out_dir = root / "reports"
    lines = [f"# {manifest.title}", "", f"Manifest `{manifest.name}` ({manifest.path.name}), paper "
             f"`{manifest.paper}`.", ""]
    if manifest.description:
        lines += [manifest.description.strip(), ""]
    results: list[ClaimResult] = []
    if manifest.base is None:  # trains nothing: the renderers draw from the manifest alone
        lines += ["This artefact needs no training.", ""]
        for path, caption in analysis.render_all(manifest, runs, "none", out_dir):
            lines += [f"![{caption}]({path.relative_to(out_dir)})", "", f"*{caption}*", ""]
    elif runs.empty:
        lines += ["No stored runs yet: `repro run " + manifest.name + " --scale tiny`.", ""]
    csv_frames = []
    for scale in [s for s in manifest.scale_names() if not runs.empty and s in set(runs["scale"])]:
        rows = runs[runs["scale"] == scale]
        keys = cell_keys(manifest, scale)
        frame = _table(manifest, rows, keys)
        csv_frames.append(frame.assign(scale=scale))
        lines += [f"## Scale `{scale}` — dataset: {analysis.datasets(rows)}", "", SCALE_NOTE.get(scale, f"**Scale: {scale}**"), ""]
        lines += [markdown_table(frame), ""]
        figures = analysis.render_all(manifest, rows, scale, out_dir)
        for path, caption in figures:
            if path.suffix == ".md":  # a renderer's table: inlined, its headings under this section's
                table_md = re.sub(r"^(#+) ", lambda m: "#" * min(len(m.group(1)) + 3, 6) + " ",
                                  path.read_text().strip(), flags=re.M)
                lines += [table_md, "", f"([{path.name}]({path.relative_to(out_dir)}), "
                          f"[csv]({path.with_suffix('.csv').relative_to(out_dir)}))", ""]
            elif path.suffix in (".png", ".svg", ".jpg", ".jpeg", ".gif"):
                lines += [f"![{caption}]({path.relative_to(out_dir)})", "", f"*{caption}*", ""]
            else:
                lines += [f"[{caption}]({path.relative_to(out_dir)})", ""]
        judged = [c for c in manifest.claims if c.scales is None or scale in c.scales]
        if judged:
            lines += [f"### Claims at scale `{scale}`", ""]
        for claim in judged:
            verdict = claims.evaluate(claim.check, rows, keys)
            results.append(ClaimResult(manifest.name, scale, claim.id, claim.text, claim.check, verdict))
            lines += [f"- **{claim.id}** — {claim.text} — **{verdict.status}** (`{claim.check}`: {verdict.detail})"]
        lines.append("")
    if manifest.notes:
        lines += ["## Notes", "", manifest.notes.strip(), ""]
    path = out_dir / f"{manifest.name}.md"
    write_atomic(path, "\n".join(lines))
    if csv_frames:
        write_atomic(out_dir / f"{manifest.name}.csv", pd.concat(csv_frames).to_csv(index=False))
    return path, results


def short_names(keys: list[str]) -> dict[str, str]:
    """Grid keys as column names: the last dotted part unless two keys share it."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: short if last.count(short) == 1 else k for k, short in zip(keys, last)}


def _table(manifest: Manifest, rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    names = short_names(keys)
    out = []
    for _, row in rows.iterrows():
        cell = {k: row[k] for k in keys if k in row}
        record = {names[k]: v for k, v in cell.items()}
        record.update({c: row[c] for c in COLUMNS if c in row and not _missing(row[c])})
        reference = reference_for(manifest, cell)
        if "label" in reference:
            record["paper row"] = reference.pop("label")
        record.update({f"paper {k}": v for k, v in reference.items()})
        out.append(record)
    return pd.DataFrame(out)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def render_all(root: Path) -> Path:
    """Every manifest's report plus ``REPORT.md``: per paper, each artefact and its claims' verdicts."""
    manifests = [load(p) for p in discover().values()]
    sections: dict[str, list[str]] = {}
    for manifest in sorted(manifests, key=lambda m: m.name):
        path, results = render(manifest, root)
        stored = table(root, manifest.name)
        scales = ", ".join(sorted(set(stored["scale"]))) if not stored.empty else "no runs"
        block = sections.setdefault(manifest.paper, [])
        block += [f"### [{manifest.title}](reports/{path.name})", "", f"`{manifest.name}` — runs stored at: {scales}", ""]
        block += [f"- {r.id} ({r.scale}): {r.text} — **{r.verdict.status}** — {r.verdict.detail}" for r in results]
        block.append("")
    lines = ["# Results", "", "Generated by `repro report --all` from the run store. Every number is labelled "
             "with its scale; `tiny` results come from 2-CPU runs on offline stand-in corpora and are not "
             "the papers' numbers.", ""]
    for paper, block in sorted(sections.items()):
        lines += [f"## {paper}", "", *block]
    path = root / "REPORT.md"
    write_atomic(path, "\n".join(lines))
    return path
