"""Same run id, same bits: a run trains with ``train.threads`` intra-op threads whatever OMP_NUM_THREADS
says (real processes), and its summary names the environment the numbers came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from repro.config import manifest as manifests
from repro.store.runs import RunDir

WIDER = ", d_model: 64, heads: 4"  # wide enough that a matmul splits over threads (the bits depend on it)


def _train(manifest, root, omp: str) -> RunDir:
    env = {**os.environ, "OMP_NUM_THREADS": omp, "WANDB_MODE": "disabled"}
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "--results", str(root), "run", str(manifest), "--no-wandb"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (spec,) = manifests.load(manifest).expand("tiny")
    return RunDir(root, spec.manifest, spec.run_id)


def test_one_run_id_gives_the_same_bits_under_any_omp_num_threads(tmp_path, write_manifest):
    text = write_manifest().read_text().replace("stride: 16}", "stride: 16" + WIDER + "}")
    manifest = tmp_path / "wide.yaml"
    manifest.write_text(text)
    one, four = (_train(manifest, tmp_path / f"omp{n}", n) for n in ("1", "4"))
    a, b = one.summary(), four.summary()
    for key in ("valid_bits", "test_bits", "avg_span" if "avg_span" in a else "params"):
        assert a[key] == b[key], key
    assert one.metrics()["train/bits"].tolist() == four.metrics()["train/bits"].tolist()
    environment = a["environment"]
    assert environment == b["environment"] and environment["threads"] == 2  # the default, not OMP's 1 or 4
    assert environment["precision"] == "32-true" and environment["torch"] and environment["device"]
    assert "threads" not in json.dumps(one.spec())  # at its default the field stays out of the spec (and id)


def test_the_thread_count_is_part_of_the_spec_when_set(tmp_path, write_manifest):
    default = manifests.load(write_manifest())
    pinned = manifests.load(write_manifest(extra_train=", threads: 1", name="one.yaml"))
    assert default.expand("tiny")[0].train.threads == 2
    assert pinned.expand("tiny")[0].train.threads == 1
    assert pinned.expand("tiny")[0].run_id != default.expand("tiny")[0].run_id
