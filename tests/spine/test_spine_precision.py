"""train.precision: bf16-mixed works where the CPU runs bf16 in hardware or is refused in one line, and
``auto`` resolves per machine, is recorded, and is kept when a run is resumed or re-executed
(repro/train/environment.py, repro/cpu_isa.py; docs/throughput.md, "Precision")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from repro import cpu_isa
from repro.config import manifest as manifests
from repro.errors import UserError
from repro.store.runs import RunDir
from repro.train import environment

AVX512 = {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
PINNABLE = cpu_isa.pin("avx2", {}) == "avx2"  # an x86-64 CPU with AVX2: the pin applies here


def _run(root, manifest, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repro", "--results", str(root), "run", str(manifest), "--no-wandb"],
        capture_output=True,
        text=True,
        env={**os.environ, "WANDB_MODE": "disabled", **env},
    )


@pytest.fixture
def cpu(monkeypatch):
    """A CPU machine whose flags and applied instruction set the test sets."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(cpu_isa.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(cpu_isa, "apply", lambda isa, run: None)  # this process's kernels stay as they are

    def machine(flags: set[str], isa: str = "native") -> None:
        monkeypatch.setattr(cpu_isa, "cpu_flags", lambda: flags)
        monkeypatch.setattr(cpu_isa, "_applied", {"isa": isa, "capability": "AVX512"})

    return machine


def test_auto_is_bf16_only_where_the_cpu_runs_bf16_in_hardware(cpu, write_manifest):
    (auto,) = manifests.load(write_manifest(extra_train=", precision: auto")).expand("tiny")
    (fp32,) = manifests.load(write_manifest(name="fp32.yaml")).expand("tiny")
    cpu(AVX512 | {"avx512_bf16"})
    assert cpu_isa.bf16_fast() and environment.resolve(auto) == "bf16-mixed"
    cpu(AVX512 | {"amx_bf16", "amx_tile"})
    assert environment.resolve(auto) == "bf16-mixed"
    cpu(AVX512)  # AVX-512 without bf16 units: bf16 is allowed (converted), not fast
    assert cpu_isa.bf16_refusal() is None and not cpu_isa.bf16_fast() and environment.resolve(auto) == "32-true"
    cpu(AVX512 | {"avx512_bf16"}, isa="avx2")  # the pin's kernels run bf16 at about 1 GFLOP/s
    assert environment.resolve(auto) == "32-true"
    cpu({"avx2", "fma"})
    assert environment.resolve(auto) == "32-true"
    # what a run recorded when it started wins; an explicit precision is the spec's whatever was recorded
    assert environment.resolve(auto, "bf16-mixed") == "bf16-mixed"
    assert environment.resolve(fp32, "bf16-mixed") == "32-true"
    assert auto.run_id != fp32.run_id  # auto is its own computation: a new run id


def test_an_auto_run_recorded_in_bf16_is_refused_in_one_line_where_bf16_is_slow(cpu, write_manifest):
    (auto,) = manifests.load(write_manifest(extra_train=", precision: auto")).expand("tiny")
    cpu({"avx2", "fma"})
    with environment.pinned(auto, "native", recorded="32-true") as precision:
        assert precision == "32-true"
    with pytest.raises(UserError) as err, environment.pinned(auto, "native", recorded="bf16-mixed"):
        pass
    (line,) = str(err.value).splitlines()
    assert auto.run_id in line and "auto (bf16-mixed, as the run recorded" in line and "has no AVX-512" in line


def test_a_reexecuted_auto_run_keeps_the_precision_it_recorded(tmp_path, write_manifest, monkeypatch):
    from repro.replay import checkpoint

    m = manifests.load(write_manifest(extra_train=", precision: auto"))
    (spec,) = m.expand("tiny")
    seen = []
    monkeypatch.setattr(checkpoint, "run_spec", lambda *a, precision=None, **kw: seen.append(precision))
    for recorded in ({"precision": "bf16-mixed"}, {"precision": "32-true"}, None):
        checkpoint.reexecute(spec, m, {"environment": recorded}, tmp_path / "scratch")
        assert seen.pop() == (recorded or {}).get("precision")


@pytest.mark.skipif(not PINNABLE, reason="the AVX2 pin applies only on an x86-64 CPU with AVX2")
def test_bf16_under_the_avx2_pin_is_refused_by_repro_run_in_one_line(tmp_path, write_manifest):
    root = tmp_path / "results"
    proc = _run(root, write_manifest(extra_train=", precision: bf16-mixed"), REPRO_CPU_ISA="avx2")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "train.precision: bf16-mixed refused on CPU" in line and "REPRO_CPU_ISA=avx2" in line
    assert not list(root.glob("runs/*/*/summary.json"))  # refused before anything of the run was written


def test_an_auto_run_trains_records_what_it_resolved_to_and_keeps_it_on_resume(tmp_path, write_manifest):
    manifest = write_manifest(extra_train=", precision: auto")
    (spec,) = manifests.load(manifest).expand("tiny")
    here = subprocess.run(  # what auto resolves to on this machine, asked of a fresh process
        [sys.executable, "-c", "from repro import cpu_isa; cpu_isa.apply('native'); print(cpu_isa.bf16_fast())"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "REPRO_CPU_ISA"},
    ).stdout.strip()
    proc = _run(tmp_path / "new", manifest)
    assert proc.returncode == 0, proc.stderr[-2000:]
    new = RunDir(tmp_path / "new", spec.manifest, spec.run_id).summary()
    assert new["status"] == "finished" and new["test_bits"] > 0
    assert new["environment"]["precision"] == ("bf16-mixed" if here == "True" else "32-true")
    assert new["compute_dtype"] == ("bf16" if here == "True" else "fp32")  # the MFU's peak is the resolved dtype's
    # a run stopped after it started in 32-true is resumed in 32-true, whatever this machine would choose
    resumed = RunDir(tmp_path / "resumed", spec.manifest, spec.run_id)
    resumed.write_summary({"status": "interrupted", "environment": {**new["environment"], "precision": "32-true"}})
    proc = _run(tmp_path / "resumed", manifest)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert resumed.summary()["environment"]["precision"] == "32-true"
    assert resumed.summary()["compute_dtype"] == "fp32"


def test_verify_says_it_cannot_reexecute_an_auto_bf16_run_where_bf16_is_slow(cpu):
    from repro.replay import verify

    spec = {"train": {"precision": "auto"}}
    summary = {"environment": {"precision": "bf16-mixed", "cpu_isa": "none", "threads": 2}}
    cpu({"avx2", "fma"})
    with pytest.raises(verify.CannotVerify, match=r"bf16-mixed \(train.precision: auto\); this CPU has no fast bf16"):
        verify._environment(spec, summary)
    cpu(AVX512 | {"avx512_bf16"})
    summary["environment"]["cpu_capability"] = verify.native_capability()
    assert verify._environment(spec, summary) == (2, ["native"])
