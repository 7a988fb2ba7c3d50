"""A quiet log and honest resume lines (issue 36): at the default verbosity a run prints the suite's
lines only (`-v` adds the libraries'); after a clean SIGINT the resume does not claim that W&B lost rows
with a killed process, and `status`, the interrupt line and the resume line count the same steps."""

from __future__ import annotations

import re
import signal

from faultkit import SignalAt

from repro.cli import main
from repro.config import manifest as manifests
from repro.store.runs import RunDir

LIBRARIES = ("GPU available", "TPU available", "`Trainer.fit` stopped", "wandb:", "Restoring states")


def test_an_interrupted_run_resumes_with_one_step_count_and_no_chatter(
    tmp_path, write_manifest, kid, capsys, monkeypatch
):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_SILENT", raising=False)
    path = write_manifest()
    (spec,) = manifests.load(path).expand("tiny")
    code, out, err = kid(["run", str(path)], callbacks=[SignalAt(12, signal.SIGINT)])
    assert code == 130, err
    shown = out + err
    assert not [c for c in LIBRARIES if c in shown], shown
    kept = int(re.search(r"checkpoint of step (\d+) kept", err)[1])
    assert main(["status", str(path)]) == 0
    assert f" interrupted  {kept}/{spec.train.steps}" in capsys.readouterr().out
    code, out, err = kid(["run", str(path), "-v"])
    assert code == 0, err
    assert f"resuming {spec.run_id} from step {kept}" in out
    assert "W&B lacked" not in out  # W&B holds every row: the interrupt closed its run cleanly
    assert "GPU available" in out + err and "wandb:" in out + err  # -v: the libraries' lines too
    assert RunDir(tmp_path / "results", spec.manifest, spec.run_id).finished
