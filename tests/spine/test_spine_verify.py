"""``repro verify``: a stored run re-executed at its commit (a real git repository, real processes) gives
its stored bits; a number changed in the store is found at its step with both values, beside the largest
difference, and passes under a ``--tolerance`` it is within; a differing line names the recorded property
of the environment that differs from this machine (the CPU vendor, recorded or inferred from an old run's
model name); a run that cannot be re-executed as it was made says why; bad input is one line, exit
status 2; a signal stops the training child and the command in one line, removing the scratch folder, and
a kill -9 takes the child with it, the next verify removing what it left."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from replaykit import GIT, alive, env, gated_commit, until, worktrees
from spine_manifests import stored_run, tiny_manifest
from textcorpus import write_corpus

from repro import cpu_isa
from repro.cli import main
from repro.config import manifest as manifests
from repro.replay import verify
from repro.replay.compare import compare, first_difference
from repro.store.runs import RunDir
from repro.train import environment

HERE = Path(__file__).resolve().parents[2]  # the checkout under test


def _repro(cwd: Path, *args: str, code: Path = HERE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repro", *args], cwd=cwd, env=env(code), capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, RunDir]:
    """A git repository holding this checkout's code and a tiny manifest, committed; its run trained into
    the repository's (untracked) results/ by that commit's code."""
    repo = tmp_path_factory.mktemp("repo")
    for folder in ("repro", "analysis"):
        shutil.copytree(HERE / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "experiments").mkdir()
    corpus = write_corpus(repo / "experiments" / "corpus.txt")
    (repo / "experiments" / "t-verify.yaml").write_text(tiny_manifest(corpus, name="t-verify"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "repro", "analysis", "experiments"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", "tiny"], check=True)
    trained = _repro(repo, "--results", "results", "run", "t-verify", "--no-wandb", code=repo)
    assert trained.returncode == 0, trained.stderr[-2000:]
    (spec,) = manifests.load(repo / "experiments" / "t-verify.yaml").expand("tiny")
    return repo, RunDir(repo / "results", "t-verify", spec.run_id)


def test_a_stored_run_re_executed_at_its_commit_gives_its_bits_and_a_changed_number_is_found(trained):
    repo, run = trained
    assert "+dirty" not in run.spec()["code_version"]
    files = sorted(p.relative_to(run.path) for p in run.path.rglob("*"))
    # the corpus lies beside the manifest of this checkout, not of the worktree: allowed by name
    allow = ("--allow-read", str(repo / "experiments"))
    same = _repro(repo, "--results", "results", *allow, "verify", run.run_id[:8])
    assert same.returncode == 0, same.stderr[-2000:]
    recorded = run.summary()["environment"]["cpu_isa"]  # the kernels it trained on: verify re-applies them
    assert same.stdout.splitlines() == [
        f"{run.run_id}  t-verify  same bits ({verify._kernels(recorded, run.summary())})"
    ]
    assert sorted(p.relative_to(run.path) for p in run.path.rglob("*")) == files  # nothing written in the store
    # issue 62.4: the child's progress lines are said as they come, under the run's line (as `repro run`'s)
    said = same.stderr.splitlines()
    assert said[0].startswith(f"verifying {run.run_id} (t-verify) at ")
    steps = [line for line in said[1:] if line.startswith("  step ")]
    assert steps and steps[-1].startswith("  step 30/30  train bits ") and "s/step" in steps[-1]

    original = run.metrics_path.read_text()
    lines = original.splitlines()
    header, row = lines[0].split(","), lines[2].split(",")
    column = header.index("train/bits")
    stored, row[column] = row[column], repr(float(row[column]) + 1e-6)
    lines[2] = ",".join(row)
    run.metrics_path.write_text("\n".join(lines) + "\n")
    differs = _repro(repo, "--results", "results", *allow, "verify", run.run_id)
    assert differs.returncode == 1, differs.stderr[-2000:]
    (line,) = differs.stdout.splitlines()
    assert f"differs at step {row[0]}: train/bits stored {row[column]}, here {stored}" in line
    # the one changed number is also the largest difference; this machine trained it: nothing recorded differs
    gap = abs(float(row[column]) - float(stored))
    relative = gap / abs(float(row[column]))
    kernels = verify._kernels(recorded, run.summary())
    assert (
        f"here {stored} ({kernels}); the largest difference too, |diff| {gap:.3g} (relative {relative:.3g}); " in line
    )
    assert line.endswith(f"no recorded property of the environment differs ({', '.join(verify.PROPERTIES)})")
    within = _repro(repo, "--results", "results", *allow, "verify", run.run_id, "--tolerance", repr(relative * 10))
    assert within.returncode == 0, within.stderr[-2000:]
    (line,) = within.stdout.splitlines()
    assert f"same within {relative * 10:g}: largest difference train/bits at step {row[0]}, stored " in line
    run.metrics_path.write_text(original)  # the module's run as trained again, for the tests after this one


def test_a_new_run_records_the_cpu_vendor_and_the_blas_it_ran(trained):
    _, run = trained
    recorded = run.summary()["environment"]
    cpuinfo = Path("/proc/cpuinfo")
    vendors = [
        line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("vendor_id")
    ]
    assert recorded["cpu_vendor"] == (vendors[0] if vendors else "unknown")
    assert recorded["blas"] == environment.blas()
    import torch

    if "BLAS_INFO=mkl" in torch.__config__.show():
        assert recorded["blas"].startswith("MKL 2")  # the version torch's build names: MKL 2024.2, ...


def test_runs_that_cannot_be_re_executed_as_made_say_why(tmp_path, write_manifest):
    (spec,) = manifests.load(write_manifest()).expand("tiny")
    dirty = stored_run(tmp_path / "results", spec, steps=30)
    record = dirty.spec() | {"code_version": "abc1234+dirty"}
    (dirty.path / "spec.yaml").write_text(yaml.safe_dump(record))
    unfinished = stored_run(tmp_path / "results", dataclasses.replace(spec, manifest="other"))
    unfinished.update_summary(status="running")
    proc = _repro(tmp_path, "--results", str(tmp_path / "results"), "verify", str(dirty.path), str(unfinished.path))
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        f"{spec.run_id}  {spec.manifest}  cannot verify: it was trained with uncommitted changes (code_version "
        "abc1234+dirty)",
        f"{spec.run_id}  other  cannot verify: the run is not finished (status running)",
    ]


def test_an_unknown_run_is_one_line_and_exit_status_2(tmp_path):
    proc = _repro(tmp_path, "--results", str(tmp_path / "results"), "verify", "0123abcd")
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert "'0123abcd'" in line and "0 stored runs" in line


def test_the_comparison_leaves_out_the_machine_and_names_a_summary_difference(tmp_path, write_manifest):
    (spec,) = manifests.load(write_manifest()).expand("tiny")
    stored = stored_run(tmp_path / "a", spec, steps=30, valid_bits=2.5, seconds_per_step=0.1, environment={"x": 1})
    again = stored_run(tmp_path / "b", spec, steps=30, valid_bits=2.5, seconds_per_step=0.3, environment={"x": 2})
    assert first_difference(stored, again) is None  # timing and environment are the machine's, not the run's
    again.update_summary(valid_bits=2.5000000000000004)
    assert str(first_difference(stored, again)) == (
        "differs at step 30: summary valid_bits stored 2.5, here 2.5000000000000004"
    )


def test_the_child_gets_the_recorded_instruction_set_and_none_of_this_checkouts_roots(monkeypatch, tmp_path):
    monkeypatch.setenv("REPRO_EXPERIMENTS", "/elsewhere")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx512")
    pinned = verify.child_environment(tmp_path, 2, "avx2")
    assert {k: pinned[k] for k in verify.ISA_VARIABLES} == dict(verify.cpu_isa.AVX2)
    assert pinned["REPRO_CPU_ISA"] == "avx2" and pinned["OMP_NUM_THREADS"] == "2"
    assert "REPRO_EXPERIMENTS" not in pinned and "REPRO_RESULTS" not in pinned
    assert pinned["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)
    native = verify.child_environment(tmp_path, 1, "native")
    assert native["REPRO_CPU_ISA"] == "native" and not set(verify.ISA_VARIABLES) & native.keys()


def test_the_vendor_of_a_run_stored_before_it_was_recorded_is_inferred_from_its_model_name():
    assert cpu_isa.vendor_of("AMD EPYC") == "AuthenticAMD"
    assert cpu_isa.vendor_of("AMD EPYC 9B14 96-Core Processor") == "AuthenticAMD"
    assert cpu_isa.vendor_of("Intel(R) Xeon(R) Platinum 8480+") == "GenuineIntel"
    assert cpu_isa.vendor_of("NVIDIA H200") is None and cpu_isa.vendor_of(None) is None
    assert verify.recorded_vendor({"device": "Intel(R) Xeon(R) CPU @ 2.20GHz"}) == ("GenuineIntel", True)
    assert verify.recorded_vendor({"cpu_vendor": "AuthenticAMD", "device": "x"}) == ("AuthenticAMD", False)
    # a shipped run stored before the vendor was recorded (st-table4 tiny, trained on an AMD EPYC)
    shipped = RunDir(HERE / "results", "st-table4", "130ec8aea7fe").summary()["environment"]
    assert "cpu_vendor" not in shipped and verify.recorded_vendor(shipped) == ("AuthenticAMD", True)


OTHER = {
    "AuthenticAMD": ("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+"),
    "GenuineIntel": ("AuthenticAMD", "AMD EPYC"),
}


def _write_bits(run: RunDir, bits: dict[int, float]) -> None:
    rows = "".join(f"{step},{value!r},0.1\n" for step, value in bits.items())
    run.metrics_path.write_text("step,train/bits,train/seconds_per_step\n" + rows)


@pytest.fixture
def reexecuted(tmp_path, write_manifest, monkeypatch):
    """A stored run's re-execution on this machine, without training (the first test re-executes for
    real): verify's checkout and training replaced by a run written here, with this machine's recorded
    environment (under the AVX2 pin). Gives ``store(environment, moved)``: the stored run, its train bits
    those of the re-execution times ``1 + moved[step]``; and the re-executed run."""
    (spec,) = manifests.load(write_manifest()).expand("tiny")
    here_env = environment.describe("32-true") | {"cpu_isa": "avx2", "cpu_capability": "AVX2", "threads": 2}
    here = stored_run(tmp_path / "here", spec, steps=30, valid_bits=2.5, environment=here_env)
    bits = {step: 4.0 + 1 / step for step in range(5, 31, 5)}
    _write_bits(here, bits)

    def store(recorded: dict, moved: dict[int, float]) -> RunDir:
        stored = stored_run(tmp_path / "results", spec, steps=30, valid_bits=2.5, environment=recorded)
        _write_bits(stored, {step: value * (1 + moved.get(step, 0.0)) for step, value in bits.items()})
        return stored

    monkeypatch.setattr(verify, "_commit", lambda run, version: (tmp_path, "abc1234"))
    monkeypatch.setattr(verify, "worktree", lambda repo, commit, where: where)
    monkeypatch.setattr(verify, "_execute", lambda *args: here)
    return store, here, here_env


def _cell(run: RunDir, step: int) -> str:
    return next(line.split(",")[1] for line in run.metrics_path.read_text().splitlines() if line.startswith(f"{step},"))


def _gap(stored: RunDir, here: RunDir, step: int) -> str:
    """How a line shows the difference of the train bits at ``step``, from the two files' cells."""
    a, b = _cell(stored, step), _cell(here, step)
    gap = abs(float(a) - float(b))
    return f"train/bits at step {step}, stored {a}, here {b}, |diff| {gap:.3g} (relative {gap / abs(float(a)):.3g})"


def test_a_differing_run_names_the_vendor_it_was_recorded_on_when_this_cpu_is_another(reexecuted, tmp_path):
    store, here, here_env = reexecuted
    if cpu_isa.vendor() not in OTHER:
        pytest.skip(f"this CPU's vendor is {cpu_isa.vendor()}")
    vendor, model = OTHER[cpu_isa.vendor()]
    stored = store(here_env | {"cpu_vendor": vendor, "device": model}, {15: 1e-7, 25: 4e-7})
    verdict = verify.verify(stored, tmp_path / "scratch")
    assert verdict.same is False
    assert verdict.text == (
        f"differs at step 15: train/bits stored {_cell(stored, 15)}, here {_cell(here, 15)} (AVX2 kernels); "
        f"largest difference {_gap(stored, here, 25)}; recorded on {vendor} ({model}), this CPU is "
        f"{cpu_isa.vendor()} ({cpu_isa.model()}): MKL picks its GEMM kernels per CPU vendor, which the AVX2 pin "
        "does not hold (docs/reproducibility.md)"
    )
    # stored before the vendor was recorded: inferred from the model name, and said so
    old = {k: v for k, v in here_env.items() if k not in ("cpu_vendor", "blas")} | {"device": model}
    verdict = verify.verify(store(old, {15: 1e-7}), tmp_path / "scratch")
    assert f"recorded on {vendor} ({model}; the vendor inferred from that model name), this CPU is " in verdict.text


def test_a_differing_run_whose_recorded_environment_is_this_machines_says_none_differs(reexecuted, tmp_path):
    store, here, here_env = reexecuted
    stored = store(here_env, {10: 1e-7})
    verdict = verify.verify(stored, tmp_path / "scratch")
    assert verdict.same is False
    a, b = float(_cell(stored, 10)), float(_cell(here, 10))
    assert verdict.text.endswith(  # the one number that differs is the first and the largest difference
        f"(AVX2 kernels); the largest difference too, |diff| {abs(a - b):.3g} (relative {abs(a - b) / abs(a):.3g}); "
        f"no recorded property of the environment differs ({', '.join(verify.PROPERTIES)})"
    )
    # another thread count recorded: named with both values
    verdict = verify.verify(store(here_env | {"threads": 3}, {10: 1e-7}), tmp_path / "scratch")
    assert verdict.text.endswith("; recorded threads 3, here 2 (docs/reproducibility.md)")


def test_tolerance_passes_a_run_within_it_and_fails_one_beyond_naming_the_largest_difference(
    reexecuted, tmp_path, capsys
):
    store, here, here_env = reexecuted
    stored = store(here_env, {10: 1e-8, 20: 3e-7})
    argv = ["--results", str(tmp_path / "results"), "verify", stored.run_id]
    assert main([*argv, "--tolerance", "1e-6"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line == (
        f"{stored.run_id}  {stored.path.parent.name}  same within 1e-06: largest difference "
        f"{_gap(stored, here, 20)} (AVX2 kernels); no recorded property of the environment differs "
        f"({', '.join(verify.PROPERTIES)})"
    )
    assert main([*argv, "--tolerance", "1e-7"]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    first = f"differs at step 10: train/bits stored {_cell(stored, 10)}, here {_cell(here, 10)} (AVX2 kernels)"
    assert f"{first}; largest difference {_gap(stored, here, 20)}, beyond the tolerance 1e-07; " in line
    assert main(argv) == 1  # bit for bit: the same first and largest differences
    (line,) = capsys.readouterr().out.splitlines()
    assert f"{first}; largest difference {_gap(stored, here, 20)}; no recorded" in line
    # a row the re-execution did not log is no difference of numbers: no tolerance passes it
    stored = store(here_env, {10: 1e-8})
    _write_bits(stored, {**{s: float(_cell(stored, s)) for s in range(5, 31, 5)}, 35: 4.0})
    assert main([*argv, "--tolerance", "0.5"]) == 1
    assert (
        "not between two numbers, so beyond any tolerance: differs at step 35: metrics.csv row"
        in capsys.readouterr().out
    )


def test_a_bad_tolerance_is_one_line_and_exit_status_2(tmp_path):
    for bad, said in (
        ("abc", "expected a number"),
        ("-0.5", "allowed: a relative difference"),
        ("0", "allowed"),
        ("inf", "allowed"),
    ):
        proc = _repro(tmp_path, "--results", str(tmp_path / "results"), "verify", "0123abcd", "--tolerance", bad)
        assert proc.returncode == 2 and proc.stdout == ""
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"error: --tolerance {bad}: {said}")


def test_one_walk_gives_the_first_and_the_largest_difference(tmp_path, write_manifest):
    (spec,) = manifests.load(write_manifest()).expand("tiny")
    stored = stored_run(tmp_path / "a", spec, steps=30, valid_bits=2.5, spans=[10.0, 20.0], name="x")
    again = stored_run(tmp_path / "b", spec, steps=30, valid_bits=2.5 * (1 + 1e-9), spans=[10.0, 20.5], name="x")
    np.savez(stored.path / "analysis.npz", attention=np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.savez(again.path / "analysis.npz", attention=np.array([[1.0, 2.0], [3.0, 4.4]]))
    compared = compare(stored, again)
    assert compared.first == first_difference(stored, again) and compared.first.what == "summary spans"
    assert compared.unnumbered is None and compared.within(0.2) and not compared.within(0.05)
    # the farthest apart, relatively: the array element (0.1) before the span's leaf (0.025)
    assert (compared.largest.what, compared.largest.step) == ("attention[1, 1]", None)
    assert compared.largest.relative == pytest.approx(0.1)
    np.savez(again.path / "analysis.npz", attention=np.array([[1.0, 2.0], [3.0, 4.0]]))
    largest = compare(stored, again).largest
    assert (largest.what, largest.stored, largest.here, largest.step) == ("summary spans[1]", 20.0, 20.5, 30)
    again.update_summary(name="y")  # not a number: no tolerance passes it
    compared = compare(stored, again)
    assert compared.unnumbered.what == "summary name" and not compared.within(0.5)


def _gated_copy(repo: Path, run: RunDir, ready: Path) -> RunDir:
    """A copy of the stored ``run`` under another results root of ``repo``, its spec naming a commit (on a
    branch of its own: the checkout stays as it was) whose training waits at step 12 for a signal."""
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", f"gated-{ready.parent.name}"], check=True)
    gated = gated_commit(repo, ready)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-"], check=True)
    root = repo / f"gated-{ready.parent.name}"
    shutil.copytree(repo / "results", root, ignore=shutil.ignore_patterns("index", "checkpoints"))
    copy = RunDir(root, "t-verify", run.run_id)
    copy.write_spec({**copy.spec(), "code_version": gated})
    return copy


def _verifying(repo: Path, copy: RunDir, ready: Path) -> tuple[subprocess.Popen, int, Path]:
    """``repro verify`` of ``copy``, started; once its child trains (waiting at step 12): the process, the
    child's pid and the scratch folder holding the commit's worktree."""
    root = copy.path.parent.parent.parent
    args = ("--results", str(root), "--allow-read", str(repo / "experiments"), "verify", copy.run_id)
    parent = subprocess.Popen(
        [sys.executable, "-m", "repro", *args],
        cwd=repo,
        env=env(HERE),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child = int(until(lambda: ready.exists() and ready.read_text(), "training child at step 12"))
    (tree,) = (tree for tree in worktrees(repo) if tree != repo)
    return parent, child, tree.parent.parent


def _files(run: RunDir) -> dict[str, bytes]:
    return {str(p.relative_to(run.path)): p.read_bytes() for p in sorted(run.path.rglob("*")) if p.is_file()}


@pytest.mark.faults
def test_a_sigterm_stops_the_training_child_in_one_line_and_removes_the_scratch_folder(trained, tmp_path):
    """Issue 62: verify's training child got no SIGTERM (SIGINT, SIGHUP) and did not die with its parent: the
    parent died at once, without a line, and left the child training on, an orphan, and its scratch folder
    with a registered worktree."""
    repo, run = trained
    ready = tmp_path / "ready"
    copy = _gated_copy(repo, run, ready)
    before = _files(copy)
    parent, child, scratch = _verifying(repo, copy, ready)
    parent.send_signal(signal.SIGTERM)
    out, err = parent.communicate(timeout=300)
    assert parent.returncode == 143 and "Traceback" not in err and out == "", err
    assert err.splitlines()[-1] == (
        f"interrupted by SIGTERM: the re-execution of run {run.run_id} stopped; the store is unchanged"
    )
    assert not alive(child)  # it stopped at its step boundary before the parent exited
    assert worktrees(repo) == [repo] and not scratch.exists()
    assert _files(copy) == before


@pytest.mark.faults
def test_a_kill_9_takes_the_training_child_with_it_and_the_next_verify_removes_its_scratch_folder(trained, tmp_path):
    repo, run = trained
    ready = tmp_path / "ready"
    copy = _gated_copy(repo, run, ready)
    parent, child, scratch = _verifying(repo, copy, ready)
    parent.kill()
    parent.communicate(timeout=60)
    until(lambda: not alive(child), "end of the training child after its parent's kill -9", seconds=60)
    assert scratch.exists() and len(worktrees(repo)) == 2  # the killed one's, stale
    # the next verify of a run of the repository (the stored one, at its own commit) removes what it left
    again = _repro(repo, "--results", "results", "--allow-read", str(repo / "experiments"), "verify", run.run_id)
    assert again.returncode == 0 and again.stdout.startswith(f"{run.run_id}  t-verify  same bits ("), again
    assert worktrees(repo) == [repo] and not scratch.exists()
