"""Same run id, same bits: a run trains with ``train.threads`` intra-op threads whatever OMP_NUM_THREADS
says, and with the pinned instruction set whatever the libraries' own variables say (real processes);
its summary names the environment the numbers came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from repro.config import manifest as manifests
from repro.store.runs import RunDir

WIDER = (
    "d_model: 32, heads: 2",
    "d_model: 64, heads: 4",
)  # wide enough that a matmul splits over threads (the bits depend on it)


# what a caller may have set to let the libraries use AVX-512 (repro's AVX2 pin overrides them)
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
    one, four = _train(manifest, tmp_path / "omp1", "1"), _train(manifest, tmp_path / "omp4", "4", **WIDEST)
    a, b = one.summary(), four.summary()
    for key in ("valid_bits", "test_bits", "avg_span" if "avg_span" in a else "params"):
        assert a[key] == b[key], key
    assert one.metrics()["train/bits"].tolist() == four.metrics()["train/bits"].tolist()
    environment = a["environment"]
    assert environment == b["environment"] and environment["threads"] == 2  # the default, not OMP's 1 or 4
    assert environment["precision"] == "32-true" and environment["torch"] and environment["device"]
    assert environment["cpu_isa"] in ("avx2", "none") and environment["cpu_capability"]
    if environment["cpu_isa"] == "avx2":  # an x86-64 CPU with AVX2: the pin held against WIDEST
        assert environment["cpu_capability"] == "AVX2"
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
    assert "REPRO_CPU_ISA" in line and "'avx1024'" in line and "avx2, native" in line


def test_the_avx2_pin_sets_the_libraries_variables_only_where_it_applies(monkeypatch):
    from repro import cpu_isa

    monkeypatch.setattr(cpu_isa.platform, "machine", lambda: "x86_64")
    env = {"ATEN_CPU_CAPABILITY": "avx512"}
    assert cpu_isa.pin(env, flags={"sse4_2", "avx2", "avx512f"}) == "avx2" and env == {**cpu_isa.AVX2}
    env = {"REPRO_CPU_ISA": "native", "ATEN_CPU_CAPABILITY": "avx512"}
    assert cpu_isa.pin(env, flags={"avx2"}) == "none" and env["ATEN_CPU_CAPABILITY"] == "avx512"
    env = {}
    assert cpu_isa.pin(env, flags={"sse4_2", "avx"}) == "none" and env == {}  # no AVX2: nothing to pin to
    monkeypatch.setattr(cpu_isa.platform, "machine", lambda: "arm64")
    assert cpu_isa.pin(env, flags={"avx2"}) == "none" and env == {}
