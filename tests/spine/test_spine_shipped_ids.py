"""Every shipped manifest resolves to the run ids (and grid cells) recorded in fixtures/run_ids.json (the
first seed of each cell: replicates add runs, they never move one), so
refactoring the manifests (``include:``, shared recipes) never orphans a stored run.

A deliberate change of a spec changes its ids: regenerate the fixture with
``python tests/spine/test_spine_shipped_ids.py`` and say why in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path

from spine_manifests import shipped

from repro.config import manifest as manifests

FIXTURE = Path(__file__).parent / "fixtures" / "run_ids.json"


def shipped_ids() -> dict[str, dict[str, list[str]]]:
    out = {}
    for name, path in sorted(shipped().items()):
        m = manifests.load(path)
        out[name] = {s: [f"{r.run_id} {r.cell_name}" for r in m.expand(s, seeds=1)] for s in m.scale_names()}
    return out


def test_shipped_manifests_keep_their_run_ids():
    recorded = json.loads(FIXTURE.read_text())
    now = shipped_ids()
    assert sorted(now) == sorted(recorded)
    for name in recorded:
        assert now[name] == recorded[name], name


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(shipped_ids(), indent=1, sort_keys=True) + "\n")
