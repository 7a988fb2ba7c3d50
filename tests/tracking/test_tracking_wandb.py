"""W&B: one folder per results root, the config, one step axis, per-head spans as heatmap + layer
means, the store's summary, and `repro report --wandb` (all checked from real offline run files)."""

from __future__ import annotations

import json
import math

import numpy as np
import yaml
from wandb_files import read_run

from repro.config import manifest as manifests
from repro.config.cells import cell_text
from repro.store.runs import RunDir
from repro.track.loggers import STEP, SpanViewLogger, grid_columns, per_head_view, run_name, split_constants


def offline_runs(store, job_type=None):
    runs = [read_run(p) for p in sorted((store.root / "wandb").glob("offline-run-*"))]
    return [r for r in runs if job_type is None or r.job_type == job_type]


def test_per_head_view_sends_layer_means_and_a_grid():
    metrics = {
        "train/bits": 2.0,
        "model/spans/0/0": 1.0,
        "model/spans/0/1": 3.0,
        "model/spans/1/0": 5.0,
        "model/spans/1/1": 7.0,
        "model/attention_window/0": 64.0,
    }
    out, grids = per_head_view(metrics)
    assert grids == {"model/spans": [[1.0, 3.0], [5.0, 7.0]]}
    assert out == {
        "train/bits": 2.0,
        "model/attention_window/0": 64.0,
        "model/spans/layer0": 2.0,
        "model/spans/layer1": 6.0,
    }


def test_split_constants_moves_the_models_constants_off_the_series():
    series, constants = split_constants({"train/bits": 2.0, "model/params": 10.0, "model/avg_span": 3.0})
    assert series == {"train/bits": 2.0, "model/avg_span": 3.0} and constants == {"params": 10.0}


def test_cell_text_names_a_grid_row_by_its_values():
    assert cell_text({"model.span.kind": "fixed", "model.span.limit": 64}) == "kind=fixed limit=64"
    row = {"data": {"name": "audio", "seq_len": 1024}, "model.d_model": 32}
    assert cell_text(row) == "name=audio seq_len=1024 d_model=32"  # no Python dict in a run name
    assert cell_text({}) == ""


def test_the_seeds_of_a_cell_have_their_own_w_and_b_names(store):
    """Issue 62.7: every seed of a cell had the same W&B run name (`stride=16` x 3)."""
    specs = manifests.load(store.manifest).expand("tiny", seeds=3)
    names = [run_name(s) for s in specs if s.model.span.limit == 16]
    assert names == ["limit=16 seed=0", "limit=16 seed=1", "limit=16 seed=2"]


def test_grid_columns_use_short_names_unless_taken():
    assert grid_columns({"model.span.limit": 64, "model.span.kind": "fixed"}) == {"limit": 64, "kind": "fixed"}
    assert grid_columns({"train.seed": 1}, taken={"seed"}) == {"train.seed": 1}


class _Experiment:
    def __init__(self):
        self.logged = []

    def log(self, row):
        self.logged.append(row)


def test_heatmaps_at_intervals_and_the_last_one_at_the_end():
    logger = SpanViewLogger(project="p", offline=True, heatmap_every=3)
    logger._experiment = _Experiment()
    for step in range(5):
        logger.log_metrics({"model/spans/0/0": float(step), "model/spans/0/1": 1.0}, step=step)
    logger.finalize("success")
    heat = [row[STEP] for row in logger._experiment.logged if "model/spans/heatmap" in row]
    assert heat == [0, 3, 4]  # every third log, and the last grid when training ends
    assert all("model/spans/0/0" not in row for row in logger._experiment.logged)
    assert [row["model/spans/layer0"] for row in logger._experiment.logged[:5]] == [0.5, 1.0, 1.5, 2.0, 2.5]


def test_offline_runs_live_under_the_results_root_with_the_config(store):
    assert not list(store.root.glob("runs/*/*/wandb"))  # no per-run W&B folder any more
    m = manifests.load(store.manifest)
    runs = {r.config["run_id"]: r for r in offline_runs(store, "adaptive_span")}
    assert set(runs) == {s.run_id for s in m.expand("tiny")}
    for spec in m.expand("tiny"):
        wb, stored = runs[spec.run_id], RunDir(store.root, m.name, spec.run_id)
        assert wb.group == m.name and wb.name == run_name(spec) and wb.state == "finished"
        assert wb.name == f"limit={spec.model.span.limit} seed=0"
        # offline: the config and summary also as plain files in the run's files/ (W&B keeps them in the log)
        readable = yaml.safe_load((wb.folder / "files" / "config.yaml").read_text())
        assert readable["run_id"] == spec.run_id and readable["limit"] == spec.cell["model.span.limit"]
        assert readable["model"]["span"]["limit"] == spec.model.span.limit and readable["paper"] == "adaptive_span"
        written = json.loads((wb.folder / "files" / "wandb-summary.json").read_text())
        assert written["valid_bits"] == stored.summary()["valid_bits"] == wb.summary_metrics["valid_bits"]
        assert written["test_bits"] == stored.summary()["test_bits"] and written["run_id"] == spec.run_id
        config = wb.config
        assert {k: config[k] for k in ("run_id", "manifest", "scale", "paper")} == {
            "run_id": spec.run_id,
            "manifest": m.name,
            "scale": "tiny",
            "paper": "adaptive_span",
        }
        assert config["code_version"] == stored.spec()["code_version"] != ""
        assert config["limit"] == spec.cell["model.span.limit"]  # the grid key as a top-level column
        assert {k: config[k] for k in ("data", "model", "train", "eval")} == json.loads(json.dumps(spec.resolved()))

        summary = stored.summary()
        assert wb.summary_metrics["valid_bits"] == summary["valid_bits"]
        assert wb.summary_metrics["test_bits"] == summary["test_bits"]
        assert wb.summary_metrics["spans"] == summary["spans"]
        quick = [row["valid/bits_quick"] for row in wb.rows if "valid/bits_quick" in row]
        assert len(quick) >= 2 and wb.summary_metrics["valid/bits_quick"] == {"min": min(quick)}
        assert wb.summary_metrics["wandb_run_id"] == wb.id

        keys = {k for row in wb.rows for k in row}
        assert all(STEP in row for row in wb.rows if "train/bits" in row)  # one step axis
        assert not keys & {"model/params", "model/span_limit"}  # constants: config columns, not series
        assert config["params"] == summary["params"] and config["span_limit"] == spec.model.span.limit
        assert not [k for k in keys if k.startswith("model/spans/") and k[-1].isdigit() and "layer" not in k]
        assert {"model/spans/layer0", "model/spans/layer1", "model/spans/heatmap"} <= keys
        images = list((wb.folder / "files" / "media" / "images" / "model" / "spans").glob("heatmap_*.png"))
        assert len(images) == 5  # 5 logs, fewer than 20: one heatmap per log
        per_head = [c for c in stored.metrics().columns if c.startswith("model/spans/")]
        assert sorted(per_head) == ["model/spans/0/0", "model/spans/0/1", "model/spans/1/0", "model/spans/1/1"]
        layer0 = [row["model/spans/layer0"] for row in wb.rows if "model/spans/layer0" in row]
        store_layer0 = stored.metrics()[["model/spans/0/0", "model/spans/0/1"]].dropna().mean(axis=1)
        assert np.allclose(layer0, store_layer0.to_numpy())
        saved = wb.folder / "files" / "analysis.npz"
        assert saved.read_bytes() == (stored.path / "analysis.npz").read_bytes()
        assert not saved.is_symlink()  # a copy: a link into the store breaks on an upload from elsewhere


def test_report_is_logged_as_a_report_run(store):
    before = {r.id for r in offline_runs(store)}
    done = store.repro("report", str(store.manifest), "--wandb")
    assert done.returncode == 0, done.stderr[-3000:]
    (report,) = [r for r in offline_runs(store, "report") if r.id not in before]
    assert report.group == "t-track" and report.config["paper"] == "adaptive_span"
    files = report.folder / "files" / "media"
    assert [p.name.split("_")[0] for p in (files / "images" / "figures").glob("*.png")] == ["t-track-curves-tiny"]
    (claims,) = (files / "table").glob("claims_*.table.json")
    table = json.loads(claims.read_text())
    assert table["columns"] == ["scale", "claim", "text", "check", "verdict", "detail"]
    from repro.store.provenance import code_version

    # a checkout with uncommitted changes trains +dirty runs, on which no verdict rests
    expected = "not evaluable" if code_version().endswith("+dirty") else "indicative (one seed)"
    assert [row[1] for row in table["data"]] == ["learns"] and table["data"][0][4] == expected
    (ours,) = (files / "table" / "tables").glob("paper_vs_ours_*.table.json")
    ours = json.loads(ours.read_text())
    assert "test_bits" in ours["columns"] and len(ours["data"]) == 2
    bits = [row[ours["columns"].index("test_bits")] for row in ours["data"]]
    stored = sorted(
        RunDir(store.root, "t-track", p.name).summary()["test_bits"]
        for p in (store.root / "runs" / "t-track").iterdir()
    )
    assert all(math.isclose(a, b) for a, b in zip(sorted(bits), stored))
    assert report.summary_metrics["claims_judged"] == 1
