"""The resolved paper-scale specs of every shipped manifest of the two papers, held to reviewed values.

``paper_specs.yaml`` (next to this file) was checked key by key against the papers and, for adaptive span,
the official scripts (the configuration audit; docs/reproduction-notes.md). An edit to a manifest, an
include or a default that moves a paper-scale value or run id fails here until the fixture is reviewed
and regenerated: ``python tests/spine/test_paper_specs.py > tests/spine/paper_specs.yaml``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from spine_manifests import shipped

from repro.config.manifest import load

FIXTURE = Path(__file__).with_name("paper_specs.yaml")
PAPERS = ("adaptive_span", "sparse_transformer")


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        out.update(_flat(value, name + ".") if isinstance(value, dict) else {name: value})
    return out


def paper_specs() -> dict[str, Any]:
    """Per manifest: the keys its paper-scale runs share, then each run's cell, id and own keys."""
    out: dict[str, Any] = {}
    for name, path in sorted(shipped().items()):
        manifest = load(path)
        runs = manifest.expand("paper") if manifest.paper in PAPERS else []  # pilots, smoke: no paper config
        if not runs:
            continue
        flat = [_flat(r.resolved()) for r in runs]
        common = {k: v for k, v in flat[0].items() if all(k in f and f[k] == v for f in flat)}
        out[name] = {
            "common": common,
            "runs": [
                {"cell": r.cell, "run_id": r.run_id, "own": {k: v for k, v in f.items() if k not in common}}
                for r, f in zip(runs, flat)
            ],
        }
    return out


def test_paper_scale_specs_match_the_reviewed_values():
    want, got = yaml.safe_load(FIXTURE.read_text()), paper_specs()
    assert sorted(got) == sorted(want), "manifests added or removed: review and regenerate paper_specs.yaml"
    problems = []
    for name in want:
        for key in sorted(set(want[name]["common"]) | set(got[name]["common"])):
            a, b = want[name]["common"].get(key, "<absent>"), got[name]["common"].get(key, "<absent>")
            if a != b:
                problems.append(f"{name}: {key}: reviewed {a!r}, now {b!r}")
        if want[name]["runs"] != got[name]["runs"]:
            problems.append(f"{name}: runs (cells, ids or per-run keys) differ from the reviewed ones")
    assert not problems, "\n".join(problems)


if __name__ == "__main__":
    sys.stdout.write("# Reviewed paper-scale specs of the shipped manifests (tests/spine/test_paper_specs.py).\n")
    yaml.safe_dump(paper_specs(), sys.stdout, sort_keys=False, default_flow_style=None, width=120)
