"""Same run id, same bits: a run trains with ``train.threads`` intra-op threads whatever OMP_NUM_THREADS
says, and under ``REPRO_CPU_ISA=avx2`` with the AVX2 kernels whatever the libraries' own variables say;
new runs are native by default, a resumed run gets the instruction set it recorded (real processes); its
summary names the environment the numbers came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from repro import cpu_isa
from repro.config import manifest as manifests
from repro.errors import UserError
from repro.store.runs import RunDir
from repro.train import environment

WIDER = (
    "d_model: 32, heads: 2",
    "d_model: 64, heads: 4",
)  # wide enough that a matmul splits over threads (the bits depend on it)


# what a caller may have set to let the libraries use AVX-512 (repro's AVX2 pin overrides them)
NATIVE = subprocess.run(  # the kernels this CPU runs when nothing pins them
    [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
    capture_output=True,
    text=True,
    env={k: v for k, v in os.environ.items() if k not in cpu_isa.AVX2},
).stdout.strip()
WIDEST = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}


def _run(root, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repro", "--results", str(root), "run", *args, "--no-wandb"],
        capture_output=True,
        text=True,
        env={**os.environ, "WANDB_MODE": "disabled", **env},
    )


def _train(manifest, root, omp: str, **env: str) -> RunDir:
    proc = _run(root, str(manifest), OMP_NUM_THREADS=omp, **env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (spec,) = manifests.load(manifest).expand("tiny")
    return RunDir(root, spec.manifest, spec.run_id)


def test_one_run_id_gives_the_same_bits_under_any_omp_num_threads_or_isa_variables(tmp_path, write_manifest):
    text = write_manifest().read_text().replace(*WIDER)
    manifest = tmp_path / "wide.yaml"
    manifest.write_text(text)
    one = _train(manifest, tmp_path / "omp1", "1", REPRO_CPU_ISA="avx2")
    four = _train(manifest, tmp_path / "omp4", "4", REPRO_CPU_ISA="avx2", **WIDEST)
    # a run stopped under the pin, resumed by a process that asked for nothing: the pin comes back
    (spec,) = manifests.load(manifest).expand("tiny")
    resumed = RunDir(tmp_path / "resumed", spec.manifest, spec.run_id)
    resumed.write_summary({"status": "interrupted", "environment": one.summary()["environment"]})
    resumed = _train(manifest, tmp_path / "resumed", "1")
    new = _train(manifest, tmp_path / "new", "1").summary()["environment"]  # native by default
    a, b, c = one.summary(), four.summary(), resumed.summary()
    for key in ("valid_bits", "test_bits", "avg_span" if "avg_span" in a else "params"):
        assert a[key] == b[key] == c[key], key
    assert one.metrics()["train/bits"].tolist() == four.metrics()["train/bits"].tolist()
    assert one.metrics()["train/bits"].tolist() == resumed.metrics()["train/bits"].tolist()
    environment = a["environment"]
    assert environment == b["environment"] == c["environment"] and environment["threads"] == 2  # not OMP's
    assert environment["precision"] == "32-true" and environment["torch"] and environment["device"]
    assert environment["cpu_isa"] in ("avx2", "none") and environment["cpu_capability"]
    if environment["cpu_isa"] == "avx2":  # an x86-64 CPU with AVX2: the pin held against WIDEST
        assert environment["cpu_capability"] == "AVX2"
    assert new["cpu_isa"] == "none" and new == {**environment, "cpu_isa": "none", "cpu_capability": NATIVE}
    assert "threads" not in json.dumps(one.spec())  # at its default the field stays out of the spec (and id)


def test_the_thread_count_is_part_of_the_spec_when_set(tmp_path, write_manifest):
    default = manifests.load(write_manifest())
    pinned = manifests.load(write_manifest(extra_train=", threads: 1", name="one.yaml"))
    assert default.expand("tiny")[0].train.threads == 2
    assert pinned.expand("tiny")[0].train.threads == 1
    assert pinned.expand("tiny")[0].run_id != default.expand("tiny")[0].run_id


def test_an_unknown_instruction_set_choice_is_refused_in_one_line(tmp_path, write_manifest):
    proc = _run(tmp_path / "results", str(write_manifest()), REPRO_CPU_ISA="avx1024")
    assert proc.returncode == 2 and not (tmp_path / "results" / "runs").exists()
    (line,) = proc.stderr.strip().splitlines()
    assert "REPRO_CPU_ISA" in line and "'avx1024'" in line and "native, avx2" in line


def test_the_avx2_pin_sets_the_libraries_variables_only_where_it_applies(monkeypatch):
    monkeypatch.setattr(cpu_isa.platform, "machine", lambda: "x86_64")
    env = {"ATEN_CPU_CAPABILITY": "avx512"}
    assert cpu_isa.pin("avx2", env, flags={"sse4_2", "avx2", "avx512f"}) == "avx2" and env == {**cpu_isa.AVX2}
    env = {"ATEN_CPU_CAPABILITY": "avx512"}
    assert cpu_isa.pin("native", env, flags={"avx2"}) == "none" and env["ATEN_CPU_CAPABILITY"] == "avx512"
    env = {}
    assert cpu_isa.pin("avx2", env, flags={"sse4_2", "avx"}) == "none" and env == {}  # no AVX2: nothing to pin to
    monkeypatch.setattr(cpu_isa.platform, "machine", lambda: "arm64")
    assert cpu_isa.pin("avx2", env, flags={"avx2"}) == "none" and env == {}


def test_a_run_gets_its_recorded_instruction_set_else_the_choice_else_the_process_s(monkeypatch):
    monkeypatch.setattr(cpu_isa, "_applied", {})
    assert cpu_isa.recorded(None) is None and cpu_isa.recorded({}) is None  # never started
    assert cpu_isa.recorded({"cpu_isa": "avx2"}) == "avx2"
    assert cpu_isa.recorded({"cpu_isa": "none"}) == cpu_isa.recorded({"torch": "2.13.0"}) == "native"  # pre-pin runs
    assert cpu_isa.for_run({"cpu_isa": "avx2"}, {"REPRO_CPU_ISA": "native"}) == "avx2"  # the record wins
    assert cpu_isa.for_run(None, {}) == "native" and cpu_isa.for_run(None, {"REPRO_CPU_ISA": "AVX2 "}) == "avx2"
    monkeypatch.setattr(cpu_isa, "_applied", {"isa": "avx2", "capability": "AVX2"})
    assert cpu_isa.for_run(None, {}) == "avx2"  # unasked, a new run follows what the process applied
    assert cpu_isa.for_run(None, {"REPRO_CPU_ISA": "native"}) == "native"


def test_a_process_refuses_a_run_that_needs_the_other_instruction_set_in_one_line(monkeypatch):
    monkeypatch.setattr(cpu_isa, "_applied", {"isa": "native", "capability": "AVX512"})
    with pytest.raises(UserError) as err:
        cpu_isa.apply("avx2", "run 0123456789ab")
    (line,) = str(err.value).splitlines()
    assert "run 0123456789ab" in line and "REPRO_CPU_ISA=avx2" in line and "already runs native" in line


def test_bf16_on_cpu_kernels_without_fast_bf16_is_refused_in_one_line(tmp_path, write_manifest, monkeypatch):
    m = manifests.load(write_manifest(extra_train=", precision: bf16-mixed"))
    (spec,) = m.expand("tiny")
    monkeypatch.setattr(cpu_isa, "_applied", {"isa": "avx2", "capability": "AVX2"})  # as if pinned before
    monkeypatch.setattr(cpu_isa, "apply", lambda isa, run: None)  # this process's kernels stay as they are
    monkeypatch.setattr(cpu_isa.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(cpu_isa, "cpu_flags", lambda: {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq"})
    with pytest.raises(UserError) as err, environment.pinned(spec, "avx2"):
        pass
    (line,) = str(err.value).splitlines()
    assert "bf16-mixed" in line and "REPRO_CPU_ISA=avx2" in line and "32-true" in line
    monkeypatch.setattr(cpu_isa, "_applied", {"isa": "native", "capability": "AVX2"})
    monkeypatch.setattr(cpu_isa, "cpu_flags", lambda: {"avx2", "fma"})  # an AVX2-only CPU, native
    with pytest.raises(UserError, match="has no AVX-512"), environment.pinned(spec, "native"):
        pass
    monkeypatch.setattr(cpu_isa, "cpu_flags", lambda: {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq"})
    assert cpu_isa.bf16_refusal() is None  # native AVX-512: bf16 runs


def test_a_stored_run_is_reexecuted_with_the_instruction_set_it_recorded(tmp_path, write_manifest, monkeypatch):
    from repro.replay import checkpoint

    m = manifests.load(write_manifest())
    (spec,) = m.expand("tiny")
    seen = []
    monkeypatch.setattr(checkpoint, "run_spec", lambda *a, isa=None, **kw: seen.append(isa))
    for environment_, isa in (({"cpu_isa": "avx2"}, "avx2"), ({"cpu_isa": "none"}, "native"), (None, None)):
        checkpoint.reexecute(spec, m, {"environment": environment_}, tmp_path / "scratch")
        assert seen.pop() == isa


def test_a_bench_refuses_an_unknown_instruction_set_in_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "--results", str(tmp_path), "bench", "attention", "--n", "64"],
        capture_output=True,
        text=True,
        env={**os.environ, "REPRO_CPU_ISA": "sse"},
    )
    assert proc.returncode == 2 and not (tmp_path / "bench").exists()
    (line,) = proc.stderr.strip().splitlines()
    assert "REPRO_CPU_ISA" in line and "'sse'" in line
