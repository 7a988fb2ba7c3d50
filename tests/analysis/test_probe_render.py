"""The probe renderers (analysis/probes.py) on a store of probe-horizon's runs, one seed per cell: the
horizon figure draws each ramp's longest span and class bits against D, and its table sets the known
answer (D < R found) beside the measured one (used[long]'s line)."""

from __future__ import annotations

import pandas as pd

from repro.config import manifest as manifests
from repro.config.manifest import resolve
from repro.report.assemble import context
from repro.report.renderers import load
from repro.store.runs import RunDir

_PROBES = load(manifests.analysis_root() / "probes.py")
M = resolve("probe-horizon")


def _store(root, found):
    """Every cell's run: a found distance has z near D and bits near the floor, a lost one z = 0, blind."""
    for spec in M.expand("probe", seeds=1):
        ramp, distance = spec.model.span.ramp, spec.data.synthetic.distance
        hit = found(ramp, distance)
        run = RunDir(root, M.name, spec.run_id)
        run.write_spec(
            {"run_id": spec.run_id, "manifest": M.name, "scale": "probe", "cell": spec.cell, **spec.resolved()}
        )
        run.write_summary(
            {
                "status": "finished",
                "dataset": spec.data.label,
                "scale": "probe",
                "steps": spec.train.steps,
                "valid_bits": 1.5 if hit else 8.1,
                "unigram_bits": 8.0,
                "span_max": float(distance if hit else 0.0),
                "valid_bits.long": 1.4 if hit else 8.1,
                "floor_bits.long": 1.264,
                "blind_bits.long": 8.0,
                "valid_bits.unseen": 8.0,
                "valid_targets.unseen": 12,
            }
        )


def test_the_horizon_draws_each_ramps_spans_and_bits_and_sets_known_beside_measured(tmp_path, drawn):
    _store(tmp_path, lambda ramp, distance: distance < ramp or (ramp, distance) == (16, 24))  # one surprise
    (table, _), (figure, _) = _PROBES.probe_horizon(context(M, tmp_path, "probe"))
    assert figure.exists()
    spans, bits = drawn["horizon"]
    lines = {label: (list(x), list(y)) for label, x, y in spans["lines"]}
    assert lines["R = 32"] == ([12.0, 24.0, 48.0, 96.0], [12.0, 24.0, 0.0, 0.0])
    assert lines["R = 16"][1] == [12.0, 24.0, 0.0, 0.0]
    assert {label: list(y) for label, _, y in bits["lines"]}["R = 64"] == [1.4, 1.4, 1.4, 8.1]
    rows = pd.read_csv(table.with_name(table.name.removesuffix(".md") + ".csv"))
    disagree = rows[rows["known answer"] != rows["measured"]]
    assert list(zip(disagree["R"], disagree["D"], disagree["measured"])) == [(16, 24, "found")]


def test_bits_per_class_stand_beside_their_floor_and_blind(tmp_path, drawn):
    _store(tmp_path, lambda ramp, distance: distance < ramp)
    (table, _), (figure, _) = _PROBES.probe_classes(context(M, tmp_path, "probe"))
    (ax,) = drawn["classes"]
    assert ax["bars"] == [1.4 if d < r else 8.1 for r in (16, 32, 64) for d in (12, 24, 48, 96)]
    text = table.read_text()
    assert "| long bits | long floor / blind |" in text and "1.264 / 8.000" in text and "unseen" in text
