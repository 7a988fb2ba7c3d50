"""A researcher's first day (issue 23): reports read at a glance and commands without dead ends."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from repro.config import claims
from repro.config import manifest as manifests
from repro.config.cells import cell_text, value_text
from repro.report import lookup

ROW = {"name": "moh-audio", "seq_len": 1024, "block": 1024}


def test_grid_values_read_as_the_manifest_writes_them():
    assert value_text(ROW) == "name=moh-audio seq_len=1024 block=1024"
    assert value_text([1, 2]) == "1,2" and value_text(2e-6) == "2e-06"
    assert cell_text({"data": ROW, "model.d_model": 32}) == "name=moh-audio seq_len=1024 block=1024 d_model=32"


def test_evidence_shows_cells_by_their_values_once():
    runs = pd.DataFrame(
        [
            {"data": {**ROW, "seq_len": n}, "model.d_model": d, "status": "finished", "valid_bits": b}
            for n, d, b in [(1024, 32, 7.5), (1024, 96, 7.4), (4096, 32, 7.7), (4096, 96, 6.9)]
        ]
    )
    keys = ["data", "model.d_model"]
    verdict = claims.evaluate("valid_bits[d_model=96] <= valid_bits[d_model=32]", runs, keys)
    assert "{'" not in verdict.detail and "name=moh-audio seq_len=4096 block=1024: 6.9" in verdict.detail
    twice = claims.evaluate("max(valid_bits[]) - min(valid_bits[]) < 0.1", runs, keys)
    assert twice.detail.count("valid_bits[] =") == 1
    assert "d_model=96: 6.9" in twice.detail  # two free keys: each named


def test_one_definition_of_learned():
    runs = pd.DataFrame(
        [
            {"model.pattern": p, "status": "finished", "valid_bits": b, "unigram_bits": 4.887}
            for p, b in [("dense", 3.937), ("strided", 3.874)]
        ]
    )
    keys = ["model.pattern"]
    assert claims.evaluate("learned[pattern=strided]", runs, keys).status == "reproduced"
    every = claims.evaluate("learned[]", runs, keys)
    assert every.status == "not reproduced" and every.detail.endswith("fails at dense")
    # a claim that the model learned is judged, not made not evaluable by the same precondition
    assert claims.evaluate("learned[]", runs, keys, ["learned[]"]).status == "not reproduced"


def test_every_shipped_learned_check_is_the_shared_one():
    for name, path in manifests.discover(manifests.SHIPPED).items():
        m = lookup.load(path)
        for claim in m.claims:
            for check in [*claim.requires, claim.check]:
                if "unigram_bits" in check or claim.id == "learns":
                    assert check in ("learned[]", "learned_test[]"), (name, claim.id, check)


@pytest.mark.parametrize("command", [["list"], ["status"]])
def test_a_reader_that_leaves_early_is_no_error(command):
    """`repro list | head -1`: the pipe closes before repro writes; it exits 0 without a traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "repro", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and err == ""
