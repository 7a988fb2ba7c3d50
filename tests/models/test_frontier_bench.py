"""``repro bench frontier`` at the frontier manifest's tiny scale: a record per attention at the manifest's
shape, the learned spans at a stored run's, the steps interleaved round by round and timed exactly (a clock
only the steps advance: nothing here is timed), and the machine's load as other processes' CPU time (a
scripted /proc/stat)."""

from __future__ import annotations

import argparse
import time

import pytest

from repro.bench import common, frontier
from repro.config.families import ATTENTIONS as REGISTERED
from repro.config.manifest import resolve
from repro.models.span import trimmed_window
from repro.store.runs import RunDir
from repro.train import throughput

M = resolve("frontier")
TINY = M.expand("tiny")
ATTENTIONS = list(REGISTERED)  # the frontier manifest's variants: every registered attention, in order
# z per layer and head (tiny: 2 layers of 4 heads) of three seeds; seed 1 has the median avg_span
ADAPTIVE = {0: [[0.0, 0.0, 5.0, 0.0], [0.0, 0.0, 0.0, 1.0]], 1: [[0.0, 3.0, 0.0, 0.0], [40.0, 0.0, 0.0, 0.0]]}
ADAPTIVE[2] = [[90.0, 0.0, 0.0, 0.0], [0.0, 120.0, 0.0, 0.0]]
DYNAMIC = {0: [[12.0, 9.0, 8.0, 5.5], [1.0, 4.0, 70.0, 3.0]]}


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    frontier.add_arguments(parser)
    return parser.parse_args(["--scale", "tiny", *argv])


def _store(root) -> dict[str, str]:
    """Finished tiny runs of the learned spans with the spans above; {variant/seed: run id}."""
    ids = {}
    for spec in M.expand("tiny", seeds=3):
        name, seed = spec.cell["variant"], spec.train.seed
        spans = {"adaptive": ADAPTIVE, "dynamic": DYNAMIC}.get(name, {}).get(seed)
        if spans is None:
            continue
        avg = sum(min(256.0, z + 32) for layer in spans for z in layer) / 8
        RunDir(root, M.name, spec.run_id).write_summary(
            {"status": "finished", "run_id": spec.run_id, "spans": spans, "avg_span": avg, "params": 1}
        )
        ids[f"{name}/{seed}"] = spec.run_id
    return ids


def test_bench_frontier_times_every_registered_attention_at_the_scales_shape_and_the_stored_spans(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path))
    ids = _store(tmp_path)
    records = frontier.main(_args("--rounds", "1", "--warmup", "1"))  # the real worker process
    assert [r["attention"] for r in records] == ATTENTIONS and [r["order"] for r in records] == list(
        range(len(ATTENTIONS))
    )
    by = {r["attention"]: r for r in records}
    for name, r in by.items():
        spec = next(s for s in TINY if s.cell["variant"] == name)
        assert "error" not in r, r
        assert (r["layers"], r["d_model"], r["block"], r["batch"]) == (
            spec.model.layers,
            spec.model.d_model,
            spec.data.block,
            spec.train.batch_size,
        )
        assert r["run_id"] == spec.run_id and r["timing"] == "interleaved" and r["rounds"] == 1
        assert r["seconds_per_step_min"] <= r["seconds_per_step"] <= r["seconds_per_step_max"]
        assert r["idle"] in (True, False, None) and "others_cores_during_max" in r
    # the adaptive span at the seed of median avg_span, exactly; each layer's window from its largest z
    adaptive = by["adaptive"]
    assert adaptive["span_run"] == ids["adaptive/1"] and "seed 1, median avg_span of 3 seeds" in adaptive["span_source"]
    assert adaptive["spans_timed"] == [pytest.approx(z) for z in ADAPTIVE[1]]
    assert adaptive["windows"] == [trimmed_window(max(z), 256, 32) for z in ADAPTIVE[1]] == [64, 128]
    # the dynamic span: every token at the stored head means, and the record says it is a lower bound
    dynamic = by["dynamic"]
    assert dynamic["span_run"] == ids["dynamic/0"] and "lower bound" in dynamic["span_source"]
    assert dynamic["spans_timed"] == [pytest.approx(z, abs=1e-3) for z in DYNAMIC[0]]
    assert dynamic["windows"] == [64, 128]
    assert by["window"]["windows"] == [42, 42] and by["dense"]["windows"] is None


def test_bench_frontier_without_stored_runs_times_the_initial_spans_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path))
    monkeypatch.setattr(common, "run_worker", lambda module, payload, env=None: frontier._worker(payload))
    by = {r["attention"]: r for r in frontier.main(_args("--rounds", "1", "--warmup", "1"))}
    for name in ("adaptive", "dynamic"):
        assert by[name]["span_source"] == "no stored run at this scale: the initial spans, held through the timing"
        assert by[name]["span_run"] is None
    assert by["adaptive"]["avg_span"] == 32.0  # z = 0 held (span.init): the ramp R
    assert by["adaptive"]["spans_timed"] == [[0.0] * 4] * 2


def test_bench_frontier_steps_round_robin_and_times_exactly_the_step(tmp_path, monkeypatch):
    """Each attention's step advances the clock by its own cost; the steps are called warm-up rounds first,
    then the timed rounds, each round every attention once in grid order; the records give each cost back
    exactly (median, min, max, every round). Another process is scripted into /proc/stat during one timed
    round: the load says so and the machine was not idle."""
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path))
    clock, calls, others = [0.0], [], [0.0]
    cost = {name: float(i + 1) for i, name in enumerate(ATTENTIONS)}
    busy_at = len(ATTENTIONS) * 3 + ATTENTIONS.index("strided") + 1  # strided's step in the second timed round
    real_setup = frontier._setup

    def setup(case):
        model, step = real_setup(case)
        name = case["attention"]

        def step_on_the_clock():
            step()
            calls.append(name)
            clock[0] += cost[name]
            if len(calls) == busy_at and busy_round:
                others[0] += 0.75 * sum(cost.values())  # another process: 0.75 cores busy through that round

        return model, step_on_the_clock

    monkeypatch.setattr(frontier, "_setup", setup)
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    # this process busy the whole wall time; the machine busy for that plus the other process
    monkeypatch.setattr(throughput, "cpu_sample", lambda: (clock[0], clock[0] + others[0], clock[0], 0.0))
    monkeypatch.setattr(common, "run_worker", lambda module, payload, env=None: frontier._worker(payload))
    for busy_round in (False, True):
        calls.clear()
        records = frontier.main(_args("--rounds", "3", "--warmup", "2"))
        assert calls == ATTENTIONS * 5  # 2 warm-up rounds, 3 timed, round-robin
        for r in records:
            c = cost[r["attention"]]
            assert (r["seconds_per_step"], r["seconds_per_step_min"], r["seconds_per_step_max"]) == (c, c, c)
            assert r["seconds_per_round"] == [c, c, c] and r["rounds"] == 3 and r["warmup"] == 2
        load = records[0]
        assert load["others_cores_before_max"] == 0.0
        assert load["others_cores_during_max"] == (0.75 if busy_round else 0.0)
        assert load["idle"] is (not busy_round)


def test_bench_frontier_refuses_an_unknown_scale_in_one_line(tmp_path, capsys):
    from repro.cli import main

    code = main(["bench", "frontier", "--scale", "huge", "--results", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "--scale huge: the frontier manifest has no such scale; its scales: tiny, cpu, paper" in err[0]
    assert not (tmp_path / "bench").exists()
