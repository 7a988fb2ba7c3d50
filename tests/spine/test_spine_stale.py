"""Stale runs (issue 59): `repro status --stale` lists the finished runs whose computation digest differs
from what today's code executes for their spec (or is unknown), with the hours their retraining takes;
`repro retrain --stale` plans exactly those; a finished run trained here is stamped with its digest."""

from __future__ import annotations

from spine_manifests import stored_run

from repro.cli import main
from repro.config import lookup
from repro.store import digest as code
from repro.store import digests
from repro.store.runs import RunDir

HOURS = {"train_seconds": 3600.0, "eval_seconds": 1800.0}


def _store(tmp_path, write_manifest, versions):
    """Runs of a two-cell manifest, each with its (code_version, recorded digest or 'today' or None)."""
    path = write_manifest(grid="grid:\n  model.stride: [8, 16]\n")
    root = tmp_path / "results"
    specs = lookup.load(path).expand("tiny", seeds=2)
    runs = []
    for spec, (version, recorded) in zip(specs, versions, strict=False):
        run = stored_run(root, spec, valid_bits=3.0, test_bits=3.1, **HOURS)
        record = spec.record(version)
        run.write_spec(record)
        if recorded is not None:
            found = code.digest(record) if recorded == "today" else recorded
            run.update_summary(digest=found, digest_format=code.FORMAT)
        runs.append(run)
    return path, runs


def test_status_stale_lists_what_today_would_not_repeat_with_why_and_the_hours(tmp_path, write_manifest, capsys):
    versions = [("abc1234", "today"), ("abc1234", "000000000000"), ("abc1234+dirty", None), ("abc1234", None)]
    path, (current, other, dirty, unread) = _store(tmp_path, write_manifest, versions)
    assert main(["status", str(path), "--stale"]) == 0
    out = capsys.readouterr().out
    assert current.run_id not in out
    lines = {r.run_id: next(line for line in out.splitlines() if r.run_id in line) for r in (other, dirty, unread)}
    assert f"it executed 000000000000, today's code {code.digest(other.spec())}" in lines[other.run_id]
    assert "uncommitted code" in lines[dirty.run_id]
    assert "not in the git history" in lines[unread.run_id]
    assert "3 stale run(s) in 1 manifest(s); retraining them takes about 4.5 h" in out

    assert main(["retrain", "--stale", str(path), "--at", "HEAD", "--dry-run"]) == 0
    planned = capsys.readouterr().out.splitlines()
    assert sorted(line.split()[0] for line in planned) == sorted(r.run_id for r in (other, dirty, unread))
    assert all(": retrain at " in line for line in planned)
    assert main(["retrain", "--stale", str(path), "--at", "HEAD", "--dry-run", "--scale", "tiny"]) == 0
    assert sorted(line.split()[0] for line in capsys.readouterr().out.splitlines()) == sorted(
        r.run_id for r in (other, dirty, unread)
    )
    assert main(["retrain", "--stale", str(path), "--at", "HEAD", "--dry-run", "--scale", "cpu"]) == 0  # its runs: tiny
    assert (
        capsys.readouterr().out == "no stale run at scale cpu: every finished run executed what today's code executes\n"
    )


def test_a_store_whose_commits_no_history_holds_is_one_line_exit_2(tmp_path, write_manifest, capsys):
    path, _ = _store(tmp_path, write_manifest, [("abc1234", None), ("def5678", None)])
    assert main(["status", str(path), "--stale"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not in the git history" in err and "the commit that trained it" in err


def test_every_run_current_says_so(tmp_path, write_manifest, capsys):
    path, _ = _store(tmp_path, write_manifest, [("abc1234", "today"), ("abc1234", "today")])
    assert main(["status", str(path), "--stale"]) == 0
    assert "no stale run: every finished run executed what today's code executes" in capsys.readouterr().out


def test_a_run_trained_from_this_checkouts_commit_is_stamped_and_no_other(tmp_path, write_manifest, monkeypatch):
    monkeypatch.setattr(digests, "code_version", lambda: "abc1234")
    _, runs = _store(tmp_path, write_manifest, [("abc1234", None), ("def5678", None), ("abc1234+dirty", None)])
    here, other, dirty = runs
    assert (
        digests.stamp(here, here.summary())
        == code.digest(here.spec())
        == RunDir(here.path.parents[2], here.path.parent.name, here.run_id).summary()["digest"]
    )
    assert here.summary()["digest_format"] == code.FORMAT  # what made it: a later format recomputes it
    assert digests.stamp(other, other.summary()) is None and "digest" not in other.summary()
    assert digests.stamp(dirty, dirty.summary()) is None and "digest" not in dirty.summary()
