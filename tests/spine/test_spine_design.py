"""The design registered (issue 60, point 5): a claim's check, premises, controls, smallest effect, split,
looks and family are hashed; the store records the hash with each run trained for it; a verdict whose
design changed after its runs existed is labelled *post hoc*, found from the store's stamps and from git
history (real git repositories here); families are declared, the suite's split by paper."""

from __future__ import annotations

import subprocess

from spine_manifests import stored_run

from repro.claims import design, registration
from repro.cli import main
from repro.config import lookup
from repro.config import manifest as manifests
from repro.report import stage

CLAIM = "claims:\n  - {id: c, text: stride 8 wins, check: 'test_bits[stride=8] < test_bits[stride=16]'}\n"
GRID = "grid:\n  model.stride: [16, 8]\n"


def _git(repo, *args):
    subprocess.run(
        ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", "-C", str(repo), *args],
        check=True,
        capture_output=True,
    )


def _stored(tmp_path, write_manifest, claims=CLAIM):
    """A manifest and its two cells' runs at 3 seeds (stride 8 better by 0.5 bits), nothing committed."""
    path = write_manifest(grid=GRID, claims=claims)
    root = tmp_path / "results"
    for spec in manifests.load(path).expand("tiny", seeds=3):
        stored_run(root, spec, test_bits=3.0 if spec.cell["model.stride"] == 16 else 2.5 + 0.01 * spec.train.seed)
    return path, root


def _line(path, root):
    _, results = stage.render(manifests.load(path), root)
    return {r.id: r for r in results}


def test_the_hash_moves_with_each_part_of_the_design_and_not_with_its_wording_or_layout():
    doc = {
        "paper": "adaptive_span",
        "requires": ["learned[]"],
        "scales": {"cpu": {"seeds": 3}},
        "claims": [{"id": "c", "text": "t", "check": "test_bits[a=1] < test_bits[a=2]", "controls": ["x[a=1] > 0"]}],
    }
    base = design.digest(design.of_document(doc, "cpu")["c"])
    same = {
        **doc,
        "claims": [{**doc["claims"][0], "text": "other words", "check": "test_bits[a=1]  <\n test_bits[a=2]"}],
    }
    assert design.digest(design.of_document(same, "cpu")["c"]) == base
    moved = {
        "check": {"claims": [{**doc["claims"][0], "check": "test_bits[a=1] < test_bits[a=2] - 0.01"}]},
        "requires": {"requires": []},
        "controls": {"claims": [{**doc["claims"][0], "controls": []}]},
        "sesoi": {"claims": [{**doc["claims"][0], "sesoi": 0.05}]},
        "split": {"split": "valid"},
        "looks": {"scales": {"cpu": {"seeds": {"first": 3, "max": 8}}}},
        "family": {"family": "frontier"},
    }
    for part, change in moved.items():
        changed = design.of_document({**doc, **change}, "cpu")["c"]
        assert design.digest(changed) != base, part
        assert design.changed(design.of_document(doc, "cpu")["c"], changed) == [part]
    # before manifests declared a split, the check named it: a valid-bits claim was judged on valid then
    valid = {"claims": [{"id": "v", "check": "valid_bits[a=1] < valid_bits[a=2]"}]}
    assert design.of_document(valid, "tiny")["v"]["split"] == "valid"


def test_a_verdict_whose_controls_were_added_after_its_runs_were_committed_is_post_hoc(tmp_path, write_manifest):
    path, root = _stored(tmp_path, write_manifest)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "runs")
    assert _line(path, root)["c"].verdict.post_hoc == ""  # judged under the design its runs were trained for
    later = CLAIM.replace("}\n", ", controls: ['test_bits[stride=8] < 2.9']}\n") + (
        "  - {id: d, text: written later, check: 'test_bits[stride=8] < 2.8'}\n"
    )
    path.write_text(path.read_text().replace(CLAIM, later))
    _git(tmp_path, "commit", "-qam", "a control, after the data")
    found = _line(path, root)
    label = found["c"].verdict.post_hoc
    assert label.startswith("*post hoc*: its controls changed after its runs existed")
    assert "entered the store's history at" in label
    assert found["d"].verdict.post_hoc.startswith("*post hoc*: written after its runs existed")
    page = (root / "reports" / "t-tiny.md").read_text()
    assert "*post hoc*: its controls changed" in page  # on the page's line, not only in the data
    assert "*post hoc*" in (root / "reports" / "tables" / "t-tiny-claims.csv").read_text()


def test_the_store_records_the_design_with_the_run_and_a_later_change_reads_post_hoc(tmp_path, write_manifest):
    path, root = _stored(tmp_path, write_manifest)  # no git: the stamps alone tell
    for spec in manifests.load(path).expand("tiny", seeds=3):
        recorded = registration.stamp(registration.RunDir(root, spec.manifest, spec.run_id), path, "tiny")
        assert recorded == {"c": design.digest(design.of_document(manifests.read(path), "tiny")["c"])}
    assert _line(path, root)["c"].verdict.post_hoc == ""
    path.write_text(path.read_text().replace("test_bits[stride=16]'", "test_bits[stride=16] - 0.1'"))
    label = _line(path, root)["c"].verdict.post_hoc
    assert label.startswith("*post hoc*: its design changed after its runs existed (its design's hash was")
    assert "recorded with its first run" in label


def test_families_are_declared_and_the_suite_is_split_by_paper(tmp_path, capsys):
    shipped = {m: lookup.load(manifests.discover()[m]).family for m in ("as-precision", "st-precision", "frontier")}
    assert shipped == {"as-precision": "adaptive_span", "st-precision": "sparse_transformer", "frontier": "frontier"}
    assert lookup.load(manifests.discover()["as-table1"]).family == "adaptive_span"  # none declared: its paper
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ntitle: t\npaper: suite\nfamily: ''\nrenders: []\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "family" in err and "expected a family name" in err


def test_the_stamp_is_a_summary_key_that_no_table_reads(tmp_path, write_manifest):
    """The designs are a mapping in summary.json: the store's tables skip mappings, so no metric moves."""
    path, root = _stored(tmp_path, write_manifest)
    spec = manifests.load(path).expand("tiny")[0]
    registration.stamp(registration.RunDir(root, spec.manifest, spec.run_id), path, "tiny")
    from repro.store.runs import table

    assert registration.STAMP in registration.RunDir(root, spec.manifest, spec.run_id).summary()
    assert registration.STAMP not in table(root, spec.manifest).columns
