"""The report writers read nothing but the report's data: a Report built by hand gives its page, its csvs
and REPORT.md's rows, with no store and no file."""

import json

import pandas as pd

from repro.claims.verdict import NOT_EVALUABLE, REPRODUCED, Verdict
from repro.report import overview, page
from repro.report.content import Note, Precondition, Report, Section, Shown
from repro.report.results import ClaimResult, rule_line


def _result(claim_id, verdict, check="valid_bits[a=1] < valid_bits[a=2]", scale="tiny"):
    return ClaimResult("m", scale, claim_id, "one wins", check, verdict, "corpus 1 (bits per byte)")


def _report(**fields) -> Report:
    base = dict(name="m", title="M — run here on corpus 1 (tiny)", file="m.yaml", paper="suite", command="m")
    return Report(**{**base, "scales": ["tiny", "cpu"], "confidence": 0.95, **fields})


def test_a_report_with_no_stored_run_names_the_command_that_trains_it():
    lines = page.lines(_report(unstored="tiny", elsewhere=["- a relative", ""]))
    assert lines == [
        "# M — run here on corpus 1 (tiny)",
        "",
        "Manifest `m` (m.yaml), paper `suite`.",
        "",
        "No stored runs yet: `repro run m --scale tiny`.",
        "",
        "- a relative",
        "",
    ]
    assert page.runs_csv(_report()) is None


def test_a_scale_section_is_written_in_order_verdicts_first_and_no_line_spliced_in():
    held = _result("c", Verdict(REPRODUCED, "+0.1 [0.05, inf], 3 seeds", 3))
    stopped = _result("d", Verdict(NOT_EVALUABLE, "", failed=["learned[]"]))
    drawn = ClaimResult("m", "tiny", "r", "drawn", "(renderer)", Verdict(REPRODUCED, "by eye"))
    section = Section(
        "tiny",
        "corpus 1",
        2,
        evaluation=["whole sequences after a start token; every element scored; the last weights scored"],
        table=pd.DataFrame({"a": [1, 2], "valid_bits": [3.0, 2.5]}),
        runs=pd.DataFrame({"a": [1, 2], "valid_bits": [3.0, 2.5], "scale": ["tiny", "tiny"]}),
        gaps=(1, 2, "0.3 bits"),
        figures=[Shown("figures/m.png", "a figure"), Shown("tables/m.md", "", "# T\n\n| x |\n|---|", "tables/m.csv")],
        judges=True,
        preconditions=[Precondition("P1", "learned[]", "fails", "bits = 5")],
        claims=[held, stopped],
        drawn=[drawn],
    )
    report = _report(
        claims=[("c", "one wins", "valid_bits[a=1] < valid_bits[a=2]")],
        left=[("corrupt", "runs/m/x: no summary")],
        description="What it is.\n",
        sections=[section],
        notes=[Note("included", "../recipe.yaml", "Theirs."), Note("own", "", "Mine.\n")],
    )
    lines = page.lines(report)
    assert lines[:10] == [  # the verdict table is one item of the list, its rows joined
        "# M — run here on corpus 1 (tiny)",
        "",
        "Manifest `m` (m.yaml), paper `suite`.",
        "",
        "Verdicts per scale (reproduced / not reproduced / within noise / indicative (one seed) / not evaluable "
        "/ sanity check / cost check).",
        "",
        rule_line(0.95),
        "",
        "| artefact | tiny |\n|---|---|\n| `m` | 2 / 0 / 0 / 0 / 1 / 0 / 0 |",
        "",
    ]
    text = "\n".join(lines)
    order = [
        "## Claims",
        "- corrupt run, left out (`repro run` redoes it): runs/m/x: no summary",
        "What it is.",
        "## Scale `tiny` — dataset: corpus 1",
        "Evaluation: whole sequences",
        "| a | valid_bits |",
        "**Valid against test** (1 of 2 cells), the widest gap: 0.3 bits.",
        "![a figure](figures/m.png)\n\n*a figure*",
        "#### T\n\n| x |\n|---|\n\n([m.md](tables/m.md), [csv](tables/m.csv))",
        "### Claims at scale `tiny`",
        "| P1 | `learned[]` | fails | bits = 5 |",
        "- **c** — **reproduced** — +0.1 [0.05, inf], 3 seeds",
        "- **d** — **not evaluable** — precondition P1",  # its failed precondition named by its label
        "- **r** — **reproduced** — by eye",
        "## Notes\n\nMine.\n",  # its own notes first, then the included file's, quoted
        "## Notes of the included `../recipe.yaml`",
        "> Theirs.",
    ]
    at = [text.index(part) for part in order]
    assert at == sorted(at), [part for part, i in zip(order, at) if i != sorted(at)[at.index(i)]]
    assert "Other stored runs" not in text and "## Scale `cpu`" not in text
    assert page.runs_csv(report).splitlines() == ["a,valid_bits,scale", "1,3.0,tiny", "2,2.5,tiny"]
    assert page.claims_csv(report.results).splitlines()[0].startswith("scale,claim,verdict,seeds,p,")


def test_report_md_and_claims_md_are_written_from_the_reports_alone():
    results = [
        _result("c", Verdict(REPRODUCED, "+0.1", 3)),
        _result("l", Verdict(REPRODUCED, ""), "learned[]"),
    ]
    results[0].adjusted = ("within noise", REPRODUCED)
    gathering = _report(name="g", title="G", paper="pilot", trains=False, parts=["m"], stored=["tiny"])
    reports = [_report(sections=[Section("tiny", "corpus 1", 1, claims=results)], stored=["tiny"]), gathering]
    lines = overview.report_lines(reports, 0.95, "**Multiplicity:** none.")
    heads = lines.index("## Headlines, in the papers' order")
    assert lines[heads + 4] == (
        "| [m](reports/m.md) | tiny | corpus 1 (bits per byte) | c | within noise | reproduced / reproduced | +0.1 |"
    )
    assert lines[heads + 5] == ""  # the sanity check is no headline; the gathering manifest judged nothing
    assert "**Multiplicity:** none." in lines and lines[-2].endswith("(reports/claims.md).")
    claims = overview.claims_lines(reports)
    assert claims[4:12] == [
        "## suite",
        "",
        "### [M — run here on corpus 1 (tiny)](m.md)",
        "",
        "`m` — runs stored at: tiny",
        "",
        "- **c** (tiny) — **within noise** (Holm; unadjusted: reproduced; BH: reproduced) — +0.1",
        "- **l** (tiny) — **trained** — ",
    ]
    assert claims[-3:] == ["`g` — gathers `m`; their runs stored at: tiny", "", ""]
    assert overview.headline(reports[0], results).id == "c"


def test_the_previous_verdicts_are_read_from_verdicts_json_alone(tmp_path):
    from repro.report.stage import stored_verdicts

    (tmp_path / "reports" / "tables").mkdir(parents=True)
    (tmp_path / "reports" / "tables" / "m-claims.csv").write_text("scale,claim,verdict\ntiny,c,reproduced\n")
    assert stored_verdicts(tmp_path) == {}  # no verdicts.json: nothing to compare with, the csvs are not parsed
    (tmp_path / "reports" / "verdicts.json").write_text(overview.verdicts_json([_result("c", Verdict(REPRODUCED, ""))]))
    assert stored_verdicts(tmp_path) == {("m", "tiny", "c"): REPRODUCED}


def test_a_verdicts_json_of_odd_shape_or_no_regular_file_is_no_previous_regeneration(tmp_path):
    """An odd key (one or four parts), an entry without a verdict, a list, or a FIFO in its place: the
    entries of the suite's shape are read, the rest left out; a FIFO is never opened for a blocking read
    (this test would hang), so `report --all` goes on (it raised ValueError on every regeneration)."""
    import os

    from repro.report.stage import stored_verdicts

    (tmp_path / "reports").mkdir()
    path = tmp_path / "reports" / "verdicts.json"
    good = json.loads(overview.verdicts_json([_result("c", Verdict(REPRODUCED, ""))]))
    odd = {"m": {"verdict": "x"}, "a\x1fb\x1fc\x1fd": {"verdict": "x"}, "m\x1ftiny\x1fe": {"no": 1}}
    path.write_text(json.dumps({**good, **odd}))
    assert stored_verdicts(tmp_path) == {("m", "tiny", "c"): REPRODUCED}
    path.write_text("[1, 2]")
    assert stored_verdicts(tmp_path) == {}
    path.unlink()
    os.mkfifo(path)
    assert stored_verdicts(tmp_path) == {}
