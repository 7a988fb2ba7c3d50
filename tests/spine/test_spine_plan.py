"""The run plan (repro/plan) and its execution (repro/session): each run's state read once from one look at
the store, and the layers kept apart (the trainer and its launcher import no plan, session or CLI)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from spine_manifests import stored_run

import repro
from repro.config import manifest as manifests
from repro.plan import runs as plans
from repro.session import local
from repro.store import digests, provenance
from repro.store.runs import RunDir
from repro.train import distributed

PACKAGE = Path(repro.__file__).parent
GRID = "grid:\n  train.steps: [30, 40, 50]\n"


def _reads(monkeypatch) -> list[tuple[Path, str]]:
    """(the run's folder, the function that read it) for each read of a summary.json from now on."""
    seen, plain = [], RunDir.summary

    def counted(run: RunDir) -> dict:
        seen.append((run.path, sys._getframe(1).f_code.co_name))
        return plain(run)

    monkeypatch.setattr(RunDir, "summary", counted)
    return seen


def test_a_plan_reads_each_runs_state_once_and_shows_it(tmp_path, write_manifest, monkeypatch):
    m = manifests.load(write_manifest(grid=GRID))
    root = tmp_path / "results"
    done, corrupt, new = m.expand("tiny")
    stored_run(root, done, test_bits=1.5)
    stored_run(root, corrupt, test_bits=1.5)
    (RunDir(root, m.name, corrupt.run_id).path / "summary.json").write_text("{half")
    looks, plain = [], RunDir.state
    monkeypatch.setattr(RunDir, "state", lambda run: looks.append(run.run_id) or plain(run))
    plan = plans.make([m], root, "tiny", echo=print)
    assert looks == [done.run_id, corrupt.run_id, new.run_id]  # one look at each run, in the plan's order
    assert [p.state.status for p in plan.runs] == ["finished", "corrupt summary: redone by run", "to run"]
    assert [p.spec.run_id for p in plan.unfinished] == [corrupt.run_id, new.run_id]
    lines = list(plan.table())
    assert lines[0].startswith(done.run_id) and lines[0].endswith("[finished]"), lines
    assert lines[1].endswith("[corrupt summary: redone by run]"), lines


def test_a_trained_run_is_read_once_when_its_turn_comes(tmp_path, write_manifest, monkeypatch):
    m = manifests.load(write_manifest(claims="claims:\n  - {id: c, text: t, check: 'test_bits[] < 9'}\n"))
    root = tmp_path / "results"
    plan = plans.make([m], root, "tiny", echo=print)
    (p,) = plan.runs
    seen = _reads(monkeypatch)
    said: list[str] = []
    assert local.train(plan, distributed.world(1, 1), said.append, no_wandb=True) == 0
    run, reads = RunDir(root, m.name, p.spec.run_id), list(seen)
    assert run.finished and any("finished:" in line for line in said), said
    # the plan's look served the ETA's list and the instruction set; the runner looks once (its state,
    # handed to settling; a run with no summary yet is not read again under its lock), the finish adds the
    # scores to the summary and the index reads its row; the ETA's own scan of the store (_timed) is apart;
    # then the session stamps what it executed (its digest, where this checkout is committed: uncommitted
    # code records none) and the designs of its manifest's claims (repro.claims.registration), each a read
    # of the summary it adds to
    committed = not digests.of_version(provenance.code_version())
    read = [f for path, f in reads if path == run.path and f != "_timed"]
    assert read[:3] == ["state", "update_summary", "_entry"] and set(read[3:]) <= {"stamp", "update_summary"}, read
    assert set(run.summary()["designs"]) == {"c"} and ("digest" in run.summary()) == committed


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_the_trainer_imports_no_plan_session_or_cli_and_the_run_command_no_report():
    for path in sorted((PACKAGE / "train").glob("*.py")):
        above = {n for n in _imports(path) if n.startswith(("repro.cli", "repro.session", "repro.plan"))}
        assert not above, (path, above)
    assert not {n for n in _imports(PACKAGE / "cli" / "run.py") if n.startswith("repro.report")}
    for path in sorted((PACKAGE / "plan").glob("*.py")):  # a plan is made and printed without torch
        assert not {n for n in _imports(path) if n.split(".")[0] in ("torch", "lightning")}, path
        assert not {n for n in _imports(path) if n.startswith(("repro.train", "repro.session", "repro.cli"))}, path
