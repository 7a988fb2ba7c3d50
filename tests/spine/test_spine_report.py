from spine_manifests import stored_run

from repro.cli import main
from repro.store.runs import short_names


def test_a_manifest_without_base_trains_nothing_and_still_reports(tmp_path, capsys):
    path = tmp_path / "pic.yaml"
    path.write_text("name: pic\ntitle: A picture\npaper: suite\nrenders: []\n")
    assert main(["validate", str(path)]) == 0
    assert main(["run", str(path)]) == 0
    assert "trains nothing" in capsys.readouterr().out
    assert not (tmp_path / "results" / "runs").exists()
    assert main(["report", str(path)]) == 0
    assert "needs no training" in (tmp_path / "results" / "reports" / "pic.md").read_text()


def test_grid_without_base_is_refused(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ntitle: t\npaper: suite\ngrid: {model.layers: [1, 2]}\n")
    assert main(["validate", str(path)]) == 2
    assert "base: required" in capsys.readouterr().err


def test_short_names_keep_full_keys_only_where_they_collide():
    assert short_names(["model.span.kind", "model.span.limit", "data.name", "model.name"]) == {
        "model.span.kind": "kind",
        "model.span.limit": "limit",
        "data.name": "data.name",
        "model.name": "model.name",
    }


def test_max_steps_runs_stay_out_of_tables_and_claims(tmp_path, write_manifest):
    """After `repro run M` and `repro run M --max-steps 10`, each cell has two stored runs: the report and
    its claims use the manifest's current resolution only (in grid order) and list the other apart."""
    from repro.config import manifest as manifests
    from repro.config.capped import with_max_steps
    from repro.report import stage as report

    grid = "grid:\n  model.stride: [16, 8]\n"
    claims = "claims:\n  - {id: c, text: short stride wins, check: 'test_bits[stride=8] < test_bits[stride=16]'}\n"
    m = manifests.load(write_manifest(grid=grid, claims=claims))
    root = tmp_path / "results"
    full = m.expand("tiny")
    for spec, bits in zip(full, [3.0, 2.0]):  # the full runs: stride 8 wins
        stored_run(root, spec, test_bits=bits)
    for spec, bits in zip(full, [3.5, 4.0]):  # the short runs would say the opposite
        stored_run(root, with_max_steps(spec, 10), test_bits=bits)
    path, results = report.render(m, root)
    assert [(r.verdict.status, r.verdict.holds) for r in results] == [("indicative (one seed)", True)]
    text = path.read_text()
    main_table, others = text.split("Other stored runs at this scale (2)")
    assert "| 3 |" in main_table and "| 2 |" in main_table and "| 3.5 |" not in main_table
    assert "| 3.5 |" in others and "| 4 |" in others and with_max_steps(full[0], 10).run_id in others
    rows = main_table[main_table.index("| stride") :].splitlines()
    assert rows[2].startswith("| 16 ") and rows[3].startswith("| 8 ")  # grid order, not run-id order

    # issue 62.4: opted in, the capped runs are the report's, on a page of their own, labelled capped
    capped, results = report.render(m, root, capped=10)
    assert capped.name == f"{m.name}-capped10.md" and path.read_text() == text  # the manifest's page untouched
    assert [(r.verdict.status, r.verdict.holds, r.capped) for r in results] == [("indicative (one seed)", False, 10)]
    page = capped.read_text()
    assert page.splitlines()[0].endswith("— CAPPED AT 10 STEPS")
    assert (
        "## Scale `tiny` — **capped at 10 steps** —" in page and "### Claims at scale `tiny` — **capped at 10" in page
    )
    assert "**indicative (one seed)** (capped at 10 steps)" in page
    table = page[page.index("| stride") :]
    assert "| 3.5 |" in table and "| 3 |" not in table.split("Other stored runs")[0]
    figures = sorted(p.name for p in (root / "reports" / "figures").iterdir() if "capped10" in p.name)
    assert figures and all(name.endswith(("-tiny-capped10.png", "-tiny-capped10.pdf")) for name in figures)


def test_report_max_steps_is_one_manifests_page_and_refused_with_all(capsys):
    assert main(["report", "--all", "--max-steps", "10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a capped report is one manifest's (name it)" in err


def test_seeds_are_replicates_judged_within_noise_and_reports_regenerate_byte_for_byte(tmp_path, write_manifest):
    """A store of 3 seeds per cell whose cells differ by less than their seed spread: the table shows
    mean ± sd (n), the csv each seed, the claim is within noise, the report opens with the verdict counts,
    and a second report over the same store writes the same bytes (figures included)."""
    from repro.config import manifest as manifests
    from repro.report import stage as report

    grid = "seeds: 3\ngrid:\n  model.stride: [16, 8]\n"
    claims = "claims:\n  - {id: c, text: short stride wins, check: 'test_bits[stride=8] < test_bits[stride=16]'}\n"
    m = manifests.load(write_manifest(grid=grid, claims=claims))
    root = tmp_path / "results"
    specs = m.expand("tiny")
    assert len(specs) == 6 and [s.train.seed for s in specs] == [0, 0, 1, 1, 2, 2]
    assert m.expand("tiny", seeds=1) == specs[:2]  # the first seed is the single-seed manifest's runs
    bits = {16: [3.00, 3.10, 2.90], 8: [2.95, 3.12, 2.98]}  # 0.017 apart on the means, each sd ~0.1
    for spec in specs:
        run = stored_run(root, spec, test_bits=bits[spec.model.stride][spec.train.seed])
        run.append_metrics([{"step": s, "train/bits": 4.0 - s / 10 + spec.train.seed / 100} for s in range(5)])
    path, results = report.render(m, root)
    assert [(r.verdict.status, r.verdict.seeds) for r in results] == [("within noise", 3)]
    text = path.read_text()
    head = text[: text.index("## Scale")]
    assert (
        "| `t-tiny` | 0 / 0 / 1 / 0 / 0 / 0 / 0 |" in head and "**Rule:** a one-sided paired t interval at 95%" in head
    )
    assert "- **c** — **within noise** — -0.0167 [" in text and "3 seeds" in text
    assert "| 16 | finished | file | 3 ± 0.1 | 3 |" in text  # mean ± sd over the seeds, then n
    csv = (root / "reports" / "t-tiny.csv").read_text().splitlines()
    assert len(csv) == 7 and csv[0].startswith("stride,seed,")
    written = lambda: {  # noqa: E731  (every file a report writes; its lock is the machine's, not git's)
        p: p.read_bytes() for p in sorted((root / "reports").rglob("*")) if p.is_file() and p.name != ".lock"
    }
    first = written()
    assert any(p.suffix == ".pdf" for p in first) and any(p.suffix == ".png" for p in first)
    report.render(m, root)
    assert written() == first


def test_the_verdict_table_opens_with_every_claims_counts_per_scale():
    """REPORT.md's table: a first row sums each scale's verdicts over every artefact, then one row each; a
    check that the model learned counts as a sanity check, apart."""
    from repro.claims.verdict import Verdict
    from repro.report.results import ClaimResult, verdict_table

    def judged(manifest, scale, *statuses):
        return [ClaimResult(manifest, scale, f"c{i}", "t", "x", Verdict(s, "")) for i, s in enumerate(statuses)]

    a = judged("a", "tiny", "reproduced", "within noise") + judged("a", "cpu", "not evaluable")
    b = judged("b", "tiny", "reproduced", "not reproduced", "reproduced")
    lines = verdict_table([("A", "reports/a.md", a), ("B", "reports/b.md", b)], ["tiny", "cpu"]).splitlines()
    assert lines[0] == "| artefact | tiny | cpu |"
    assert lines[2] == "| **every claim** | 3 / 1 / 1 / 0 / 0 / 0 / 0 | 0 / 0 / 0 / 0 / 1 / 0 / 0 |"
    assert lines[3] == "| A | [1 / 0 / 1 / 0 / 0 / 0 / 0](reports/a.md) | [0 / 0 / 0 / 0 / 1 / 0 / 0](reports/a.md) |"
    assert lines[4] == "| B | [2 / 1 / 0 / 0 / 0 / 0 / 0](reports/b.md) | — |"
    learned = [ClaimResult("c", "tiny", "l", "t", "learned[]", Verdict("reproduced", ""))]
    assert verdict_table([("C", None, learned)], ["tiny"]).splitlines()[2] == "| C | 0 / 0 / 0 / 0 / 0 / 1 / 0 |"
    assert learned[0].status == "trained"
    # a sanity check within noise (st-table1-cifar10 tiny) is still a sanity check, never a finding
    unclear = [ClaimResult("c", "tiny", "l", "t", "learned[]", Verdict("within noise", "", 3))]
    assert verdict_table([("C", None, unclear)], ["tiny"]).splitlines()[2] == "| C | 0 / 0 / 0 / 0 / 0 / 1 / 0 |"
    assert unclear[0].status == "learning unclear (within noise)"
    # a check made only of FLOPs or memory is a cost check, counted apart from the findings
    cost = [
        ClaimResult("d", "tiny", "f", "t", "flops_per_token[a=1] < flops_per_token[a=2]", Verdict("reproduced", ""))
    ]
    assert verdict_table([("D", None, cost)], ["tiny"]).splitlines()[2] == "| D | 0 / 0 / 0 / 0 / 0 / 0 / 1 |"
    one = verdict_table([("A", None, a)], ["tiny", "cpu"]).splitlines()
    assert len(one) == 3 and "every claim" not in one[2]  # one artefact: its row is the total


def test_a_bits_verdict_is_not_evaluable_where_its_paired_curves_flip_or_are_missing(tmp_path, write_manifest):
    """The trajectory gate reads each run's stored curve: a verdict whose margin turns towards the baseline
    at the end of the training curve (heading past it by 1.5 x the steps) is the budget's; one with no curve
    cannot show otherwise (the old last-fifth gate passed a missing curve silently)."""
    from repro.config import manifest as manifests
    from repro.report import stage as report

    grid = "grid:\n  model.stride: [16, 8]\n"
    claims = "claims:\n  - {id: c, text: stride 8 wins, check: 'test_bits[stride=8] < test_bits[stride=16]'}\n"
    m = manifests.load(write_manifest(grid=grid, claims=claims))
    for case in ("steady", "turns", "none"):
        root = tmp_path / f"results-{case}"
        for spec in m.expand("tiny"):
            eight = spec.cell["model.stride"] == 8
            run = stored_run(root, spec, curve=False, test_bits=2.9 if eight else 3.0, steps=100)
            curve = [4.0 - 0.1 * i - (0.05 if eight else 0.0) for i in range(10)]
            if case == "turns" and eight:  # the claimed side stops improving: the baseline catches up
                curve[-3:] = [curve[-4] + 0.02, curve[-4] + 0.04, curve[-4] + 0.06]
            if case != "none":
                run.append_metrics([{"step": 10 * i + 9, "train/bits": b} for i, b in enumerate(curve)])
        _, (result,) = report.render(m, root)
        v = result.verdict
        if case == "steady":
            assert v.status.startswith("indicative") and any("trajectory" in h for h in v.held), v
        else:
            assert v.status == "not evaluable" and v.control == "trajectory", v
            assert ("heads to the baseline's side" if case == "turns" else "no learning curve") in v.detail


def test_holm_and_benjamini_hochberg_adjust_a_family_of_p_values():
    from repro.claims.stats import adjusted

    # m = 4 at 5%: Holm needs 0.0125, 0.0167, 0.025, 0.05 in order; BH the largest p_(k) <= 0.0125 k
    holm, bh = adjusted([0.01, 0.04, 0.03, 0.2])
    assert holm == [True, False, False, False]  # 0.03 > 0.05 / 3 stops Holm at the second
    assert bh == [True, False, False, False]  # 0.03 > 0.025 and 0.04 > 0.0375
    holm, bh = adjusted([0.001, 0.012, 0.013, 0.2])
    assert holm == [True, True, True, False] and bh == [True, True, True, False]
    holm, bh = adjusted([0.02, 0.03, 0.035, 0.04])  # each < 5% alone; BH keeps all (0.04 <= 0.05), Holm none
    assert holm == [False] * 4 and bh == [True] * 4


def test_report_all_adjusts_distinct_run_sets_once_and_lists_the_verdicts_that_moved(tmp_path):
    from repro.claims.verdict import Margin, Verdict
    from repro.report.multiplicity import multiplicity
    from repro.report.overview import moved_verdicts
    from repro.report.results import ClaimResult

    def found(name, runs, p, status="reproduced"):
        margin = Margin(0, "", 0.1, 0.05, 0.15, 3, status=1 if status == "reproduced" else 0, p_holds=p, p_fails=1 - p)
        return ClaimResult(
            name,
            "tiny",
            "c",
            "t",
            "valid_bits[a=1] < valid_bits[a=2]",
            Verdict(status, "", 3, [margin], runs=runs, p_holds=p, p_fails=1 - p),
        )

    same = frozenset({"r1", "r2"})
    # the one-sided p of the direction found; the families are fed the two-sided one (twice it)
    results = [found("a", same, 0.015), found("b", same, 0.015), found("c", frozenset({"r3"}), 0.0005)]
    papers = {name: "adaptive_span" for name in "abcd"}
    text = multiplicity(results, 0.05, papers)
    assert "3 verdicts are judged by the t rule" in text and "3 *findings*" in text and "2 distinct tests" in text
    assert "Of the 3 findings" in text  # one count of findings, not two
    assert "expect 0.3 false readings" in text  # 3 directional tests x 10% (5% per tail)
    # two tests: Holm needs 0.05 for the second smallest; 0.03 passes, and BH keeps both
    assert [r.adjusted for r in results] == [("reproduced", "reproduced")] * 3
    results.append(found("d", frozenset({"r4"}), 0.02))  # three tests: Holm needs 0.025 for the second
    multiplicity(results, 0.05, papers)
    assert results[0].adjusted == ("within noise", "reproduced") and results[3].adjusted == (
        "within noise",
        "reproduced",
    )
    line = results[0].line({})
    assert "**within noise** (Holm; unadjusted: reproduced; BH: reproduced)" in line  # led by the adjusted
    # the same computation under other run ids (the frontier's fixed run is st-table2's) is one test, not two
    twin = [found("x", frozenset({"f1"}), 0.02), found("y", frozenset({"s1"}), 0.02)]
    for r in twin:
        r.verdict.computed = frozenset({"same-numbers"})
    assert "0 within noise; 1 distinct tests once" in multiplicity(twin, 0.05, {"x": "suite", "y": "sparse"})
    # another paper's test is another family: it does not count against these
    other = found("e", frozenset({"r5"}), 0.02)
    multiplicity([*results, other], 0.05, {**papers, "e": "sparse_transformer"})
    assert other.adjusted == ("reproduced", "reproduced")
    before = {("a", "tiny", "c"): "within noise", ("gone", "cpu", "x"): "reproduced"}
    lines = moved_verdicts(before, results[:1])
    assert any(line.startswith("- a (tiny) **c**: within noise -> **reproduced** — +0.1") for line in lines)
    assert any(line.startswith("- gone (cpu) **x**: reproduced -> **—**") for line in lines)
    assert moved_verdicts({("a", "tiny", "c"): "reproduced"}, results[:1]) == []
    # the verdicts are kept as data, not parsed back out of REPORT.md's prose
    from repro.report.overview import verdicts_json
    from repro.report.stage import stored_verdicts

    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "verdicts.json").write_text(verdicts_json(results))
    assert stored_verdicts(tmp_path)[("a", "tiny", "c")] == results[0].status
