"""Pages a reviewer can act on (issue 60, point 7): a judged claim's line shows the premises and controls it
passed with their margins and what its interval covers; a not-evaluable line names the command that would
make it evaluable and its cost from the stored wall times, or why no command can; REPORT.md's counts
are one set (its per-scale table counts the verdicts as its lines lead, Holm's)."""

from __future__ import annotations

import pandas as pd
from spine_manifests import stored_run

from repro.claims.verdict import Margin, Verdict
from repro.config import manifest as manifests
from repro.report import cost, stage
from repro.report.results import ClaimResult, verdict_table

HOURS = {"train_seconds": 3600.0, "eval_seconds": 1800.0}
CLAIMS = """claims:
  - id: wins
    text: stride 8 wins
    check: 'test_bits[stride=8] < test_bits[stride=16]'
    requires: ['test_bits[stride=8] < 2.9']
    controls: ['test_bits[stride=8] < 2.95']
  - {id: missing, text: stride 4 wins, check: 'test_bits[stride=4] < test_bits[stride=16]'}
  - {id: premise, text: p, check: 'test_bits[stride=8] < test_bits[stride=16]', requires: ['test_bits[stride=8] < 2.0']}
"""


def _page(tmp_path, write_manifest):
    """Stride 8 beats 16 by about 0.5 bits at 3 seeds; stride 4's runs are not trained."""
    path = write_manifest(grid="grid:\n  model.stride: [16, 8, 4]\n", claims=CLAIMS)
    m, root = manifests.load(path), tmp_path / "results"
    for spec in m.expand("tiny", seeds=3):
        if spec.cell["model.stride"] != 4:
            bits = 3.0 if spec.cell["model.stride"] == 16 else 2.5 + 0.01 * spec.train.seed
            stored_run(root, spec, test_bits=bits, **HOURS)
    page, results = stage.render(m, root)
    lines = {
        line.split("**")[1]: line for line in page.read_text().splitlines() if line.startswith("- **") and " — " in line
    }
    return lines, {r.id: r for r in results}, m


def test_a_reproduced_line_shows_its_premise_and_control_with_their_margins_and_what_it_covers(
    tmp_path, write_manifest
):
    lines, results, _ = _page(tmp_path, write_manifest)
    assert results["wins"].verdict.status == "reproduced"
    line = lines["wins"]
    assert "3 seeds (initialisations; one data order; one split, test)" in line
    assert "premise `test_bits[stride=8] < 2.9`: holds on every seed (+0.39 [" in line
    assert "control `test_bits[stride=8] < 2.95`: +0.44 [" in line


def test_a_not_evaluable_line_names_the_command_and_its_cost_or_why_none_can(tmp_path, write_manifest):
    lines, results, m = _page(tmp_path, write_manifest)
    line = lines["missing"]
    assert results["missing"].verdict.status == "not evaluable"
    # 3 of the 9 runs are missing, each 1.5 h as the stored ones took (training + scoring)
    assert f"train the scale's missing runs: `repro run {m.command} --scale tiny`" in line
    assert "(about 4h30m for 3 runs at the stored runs' mean wall time)" in line
    assert "no command makes it evaluable at this design: its premise failed on the data" in lines["premise"]


def test_the_interval_covers_the_data_order_where_the_seed_draws_it():
    images = pd.DataFrame({"dataset_unit": ["dim"], "train.stream_passes": ["wrap"]})
    streams = pd.DataFrame({"dataset_unit": ["byte"], "train.stream_passes": ["random_offset"]})
    text = pd.DataFrame({"dataset_unit": ["byte"], "train.stream_passes": ["wrap"]})
    assert cost.covers(images, "valid") == "initialisations and example orders; one split, valid"
    assert cost.covers(streams, "test") == "initialisations and pass offsets; one split, test"
    assert cost.covers(text, "test") == "initialisations; one data order; one split, test"


def test_the_per_scale_table_counts_the_verdicts_as_the_lines_lead():
    margin = Margin(0, "", 0.1, 0.05, 0.15, 3, status=1, p_holds=0.02, p_fails=0.98)
    found = ClaimResult(
        "m", "tiny", "c", "t", "test_bits[a=1] < test_bits[a=2]", Verdict("reproduced", "", 3, [margin])
    )
    found.adjusted = ("within noise", "reproduced")  # Holm's verdict leads its line
    table = verdict_table([("m", None, [found])], ["tiny"])
    assert table.splitlines()[-1] == "| m | 0 / 0 / 1 / 0 / 0 / 0 / 0 |"
