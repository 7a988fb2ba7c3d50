"""`repro dashboard`: the store imported into a local trackio project (incrementally), served, and
looked at in a real headless Chromium."""

from __future__ import annotations

import html
import importlib.util
import json
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading

import pytest

from repro.config import manifest as manifests
from repro.identity import spec_id
from repro.store.runs import RunDir

# Found, not imported: trackio binds its folder on import, and repro.track.dashboard binds it to the store's.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("trackio") is None, reason="trackio is not installed: pip install -e '.[dashboard]'"
)


def test_import_is_incremental_with_config_grouping_and_metrics(store, tmp_path):
    from repro.track import dashboard

    root = tmp_path / "results"
    for folder in ("runs", "sources"):  # sources: where t-track's manifest is (its paper numbers)
        shutil.copytree(store.root / folder, root / folder)
    record = {"manifest": "t-other", "scale": "tiny", "cell": {}}  # its id: its spec's hash (else corrupt)
    waiting = RunDir(root, "t-other", spec_id(record))
    waiting.write_spec({"run_id": waiting.run_id, **record})
    waiting.update_summary(status="running")
    m = manifests.load(store.manifest)
    keys = sorted(f"t-track/{s.run_id}" for s in m.expand("tiny"))

    first = dashboard.import_runs(root)
    assert sorted(first.imported) == keys and first.unfinished == [f"t-other/{waiting.run_id}"]
    assert sorted(first.ids("tiny")) == keys and first.ids("cpu") == []
    second = dashboard.import_runs(root)
    assert second.imported == [] and sorted(second.present) == keys

    storage = dashboard.storage(root)
    assert storage.get_projects() == ["repro-tiny"]  # one project per scale
    records = {r["id"]: r["name"] for r in storage.get_run_records("repro-tiny")}
    assert sorted(records) == keys
    for spec in m.expand("tiny"):
        key, run = f"t-track/{spec.run_id}", RunDir(root, m.name, spec.run_id)
        limit = spec.cell["model.span.limit"]
        assert records[key] == f"{limit} · t-track"  # a one-key grid: its value
        config = storage.get_run_config("repro-tiny", run_id=key)
        assert config["_Group"] == f"{limit} · t-track" and config["limit"] == limit and config["scale"] == "tiny"
        assert config["model"]["span"]["limit"] == limit and config["train"]["lr"] == spec.train.lr
        assert config["eval"]["splits"] == list(spec.eval.splits)  # a list, not JSON text
        assert not [k for k in config if "." in k]  # trackio's comparer would show them escaped
        assert config["run_id"] == spec.run_id and config["code_version"] == run.spec()["code_version"]
        assert config["params"] == run.summary()["params"] and config["span_limit"] == limit  # constants
        assert config["summary"]["test_bits"] == pytest.approx(run.summary()["test_bits"])
        assert config.get("paper") == ({"label": "a reference row", "test_bits": 1.25} if limit == 16 else None)

        logs = storage.get_logs("repro-tiny", run_id=key)
        metrics = run.metrics()
        assert [log["step"] for log in logs] == list(metrics["step"])
        assert [log["bits/train"] for log in logs] == pytest.approx(list(metrics["train/bits"]))
        quick = [log["bits/valid_quick"] for log in logs if "bits/valid_quick" in log]
        assert quick == pytest.approx(list(metrics["valid/bits_quick"].dropna()))
        assert logs[-1]["bits/test"] == pytest.approx(run.summary()["test_bits"])
        assert logs[-1]["bits/valid"] == pytest.approx(run.summary()["valid_bits"])
        assert logs[-1].get("bits/test (paper)") == (1.25 if limit == 16 else None)
        assert "summary/avg_span" in logs[-1] and "summary/params" not in logs[-1]
        assert not [k for log in logs for k in log if k in ("model/params", "model/span_limit")]
        assert "model/spans/layer0" in logs[0] and "model/spans/0/0" not in logs[0]

    # a run imported by an older importer (no format mark) is imported again, in place of the old one
    key = keys[0]
    storage.delete_run("repro-tiny", key, run_id=key)
    storage.bulk_log(project="repro-tiny", run="old name", run_id=key, metrics_list=[{"x": 1.0}], config={"a.b": 1})
    third = dashboard.import_runs(root)
    assert third.imported == [key] and sorted(third.present) == keys[1:]
    assert [r["name"] for r in storage.get_run_records("repro-tiny")].count("old name") == 0
    assert "a.b" not in storage.get_run_config("repro-tiny", run_id=key)


def test_run_names_read_a_grid_row_by_its_values_and_seeds_share_their_cells_colour():
    from repro.track.dashboard import cell_columns, cell_palette, group_name, run_name

    spec = {"manifest": "st-table4", "run_id": "0ce7a26cafb5", "cell": {"data": {"name": "audio", "seq_len": 1024}}}
    assert run_name(spec) == "name=audio seq_len=1024 · st-table4"
    assert run_name({**spec, "cell": {}}) == "st-table4"
    assert run_name(spec, twin=True) == "name=audio seq_len=1024 · st-table4 #0ce7a2"
    seeded = {"manifest": "as-table1", "run_id": "71136187bc4e", "cell": {"variant": "adaptive-small"}}
    seeded["train"] = {"seed": 1}
    assert run_name(seeded, seeds=True) == "adaptive-small s1 · as-table1"  # short enough for a bar's label
    assert group_name(seeded) == "adaptive-small · as-table1"  # what its seeds share
    groups = ["a", "b", "a", "c", "b", "a"]  # each run's cell, in trackio's order of the runs
    assert cell_palette(groups, ["red", "green", "blue"]) == ["red", "green", "red", "blue", "green", "red"]
    columns = cell_columns({"data": {"name": "audio", "block": 64}, "model.d_model": 32}, {"data", "model", "name"})
    assert columns == {"data_name": "audio", "block": 64, "d_model": 32}


@pytest.fixture
def chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip(
            "no chromium on PATH (Debian: apt-get install chromium): the dashboard's browser test "
            "needs a headless browser"
        )
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Output:
    """A process's stdout, read line by line in a thread (so waiting for a line can time out)."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.lines.append(line)
            self._queue.put(line)

    def wait_for(self, prefix: str, timeout: float) -> str:
        while True:
            line = self._queue.get(timeout=timeout)
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def text(self) -> str:
        self._thread.join(timeout=30)
        return "".join(self.lines)


def _sections(dom: str) -> list[tuple[str, list[tuple[str, bool]]]]:
    """The Metrics page's sections in page order: (label, [(metric, drawn as bars), ...]); subsections
    count as sections of their own."""
    parts = re.split(r'<span class="accordion-label">([^<]*)</span>', dom)
    out = []
    for label, body in zip(parts[1::2], parts[2::2]):
        plots = re.findall(r'<div class="plot-container ([^"]*)" data-metric="([^"]*)"', body)
        out.append((label.strip(), [(html.unescape(metric), "bar-plot" in cls) for cls, metric in plots]))
    return out


def test_dashboard_opens_on_the_bits_in_a_browser(store, chromium, tmp_path):
    from browser import Page  # websockets: trackio's

    m = manifests.load(store.manifest)
    proc = subprocess.Popen(
        [sys.executable, "-m", "repro", "dashboard", str(store.manifest), "--port", str(_free_port())],
        env=store.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = _Output(proc)
    page = None
    try:
        url = output.wait_for("dashboard: ", 120)
        page = Page(chromium, tmp_path / "chromium")
        page.open(url)
        page.wait_for('document.querySelectorAll(".plot-container svg, .plot-container canvas").length >= 4')
        dom = page.evaluate("document.documentElement.outerHTML")
        page.evaluate(
            '[...document.querySelectorAll("label")].find(l => l.textContent.includes("run comparer")).click()'
        )
        page.wait_for('document.querySelector(".comparer-table td.value-cell") !== null')
        rows = page.evaluate(
            '[...document.querySelectorAll(".comparer-table tr")].map(r => [...r.children].map(c => c.textContent.trim()))'
        )
    finally:
        if page is not None:
            page.close()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    printed = output.text()
    assert proc.returncode == 0 and "dashboard stopped" in printed, printed
    assert "project 'repro-tiny' (2 run(s) shown)" in printed
    assert printed.count("http") == 1 and "write_token" not in printed  # one address, no token in the log
    assert "project=repro-tiny" in url and "plots_per_row=2" in url
    sections = _sections(dom)
    label, plots = sections[0]  # the first section: bits against steps, then the summary's bits as bars
    assert label == "bits (5)", sections
    assert plots == [
        ("bits/train", False),
        ("bits/valid_quick", False),
        ("bits/test", True),
        ("bits/test (paper)", True),  # the reference's number for limit=16
        ("bits/valid", True),
    ]
    assert [label.split(" ")[0] for label, _ in sections[1:3]] == ["summary", "train"]
    shown = [metric for _, plots in sections for metric, _ in plots]
    assert "model/avg_span" in shown and not [k for k in shown if k.endswith(("/params", "/span_limit"))]
    for spec in m.expand("tiny"):
        assert f"{spec.cell['model.span.limit']} · t-track" in html.unescape(dom)  # legends and sidebar

    # the run comparer: nested keys as plain dotted paths, lists as lists, the constants as config
    values = {row[0]: row[1:] for row in rows if len(row) == 3}
    assert values["data.block"] == ["32", "32"] and values["eval.splits"] == ['["valid","test"]'] * 2
    assert all(v.isdigit() for v in values["params"]) and sorted(values["limit"]) == ["16", "32"]
    assert not [key for key in values if "\\" in key] and not [v for vs in values.values() for v in vs if '\\"' in v]


def test_a_scale_without_finished_runs_is_a_one_line_error(store):
    done = store.repro("dashboard", str(store.manifest), "--scale", "cpu", timeout=300)
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith("no finished run of t-track at scale 'cpu' to show (finished at: tiny); pass --scale")
    ), done.stderr


def test_a_prior_works_number_is_not_drawn_beside_ours(store):
    """Table 1's T12 entry (`prior: true`) is another model in the role our fixed-span row plays: the
    dashboard draws the paper's number only beside the same model's."""
    from repro.track.dashboard import run_metrics

    spec = manifests.load(store.manifest).expand("tiny")[0]
    run = RunDir(store.root, spec.manifest, spec.run_id)
    rows, _, _ = run_metrics(run, {"label": "T12 (prior work)", "prior": True, "test_bits": 1.18})
    assert "bits/test" in rows[-1] and "bits/test (paper)" not in rows[-1]
    rows, _, _ = run_metrics(run, {"label": "the same model", "test_bits": 1.11})
    assert rows[-1]["bits/test (paper)"] == 1.11


def test_the_papers_number_is_one_bar_a_cell_not_one_per_seed(store, tmp_path):
    """Issue 49.5: the "test (paper)" panel drew the paper's constant once per seed, three equal bars a
    cell. A second seed of the cell that has a paper number: the number is drawn beside the first only."""

    root = tmp_path / "results"
    for folder in ("runs", "sources"):
        shutil.copytree(store.root / folder, root / folder)
    m = manifests.load(store.manifest)
    spec = next(s for s in m.expand("tiny") if s.cell["model.span.limit"] == 16)
    again = next(s for s in m.expand("tiny", seeds=2) if s.cell == spec.cell and s.train.seed == spec.train.seed + 1)
    first = RunDir(root, m.name, spec.run_id)
    twin = RunDir(root, m.name, again.run_id)
    shutil.copytree(first.path, twin.path)
    twin.write_spec(again.record(first.spec()["code_version"]))
    twin.write_summary({**first.summary(), "run_id": again.run_id})
    ids = [f"{m.name}/{s.run_id}" for s in (spec, again)]
    code = (  # trackio binds one folder a process: the import runs in a process of its own
        "import json, sys\n"
        "from pathlib import Path\n"
        "from repro.track import dashboard\n"
        "root = Path(sys.argv[1])\n"
        "dashboard.import_runs(root)\n"
        "storage = dashboard.storage(root)\n"
        "print(json.dumps([storage.get_logs('repro-tiny', run_id=key)[-1] for key in sys.argv[2:]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root), *ids], env=store.env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    drawn = json.loads(done.stdout.strip().splitlines()[-1])
    assert [logs.get("bits/test (paper)") for logs in drawn] == [1.25, None]
    assert all("bits/test" in logs for logs in drawn)  # each seed's own bits stay


def test_an_mfu_above_one_reaches_the_run_comparer_as_implausible(tmp_path):
    """Issue 62.9: a run stored with MFU 2.25 (its peak measured under load) is shown with why, not as a
    number to compare; a plausible one stays a number."""
    from repro.track.dashboard import run_config

    for seed, mfu, shown in ((0, 2.25, "2.25 (implausible: peak measured under load)"), (1, 0.4, 0.4)):
        record = {"manifest": "t-mfu", "scale": "cpu", "cell": {}, "train": {"seed": seed}}
        run = RunDir(tmp_path / "results", "t-mfu", spec_id(record))
        run.write_spec({"run_id": run.run_id, **record})
        run.write_summary({"status": "finished", "mfu": mfu, "valid_bits": 2.6})
        assert run_config(run, {}, {})["summary"]["mfu"] == shown
        assert run.summary()["mfu"] == mfu  # the store keeps its number
