"""`repro dashboard`: the store imported into a local trackio project (incrementally), served, and
looked at in a real headless Chromium."""

from __future__ import annotations

import importlib.util
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading

import pytest

from repro.config import manifest as manifests
from repro.store.runs import RunDir

# Found, not imported: trackio binds its folder on import, and repro.track.dashboard binds it to the store's.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("trackio") is None, reason="trackio is not installed: pip install -e '.[dashboard]'"
)


def test_import_is_incremental_with_config_grouping_and_metrics(store, tmp_path):
    from repro.track import dashboard

    root = tmp_path / "results"
    shutil.copytree(store.root / "runs", root / "runs")
    waiting = RunDir(root, "t-other", "0123456789ab")
    waiting.write_spec({"run_id": "0123456789ab", "manifest": "t-other", "scale": "tiny", "cell": {}})
    waiting.update_summary(status="running")
    m = manifests.load(store.manifest)
    keys = sorted(f"t-track/{s.run_id}" for s in m.expand("tiny"))

    first = dashboard.import_runs(root)
    assert sorted(first.imported) == keys and first.unfinished == ["t-other/0123456789ab"]
    second = dashboard.import_runs(root)
    assert second.imported == [] and sorted(second.present) == keys

    storage = dashboard.storage(root)
    assert sorted(r["id"] for r in storage.get_run_records("repro")) == keys
    for spec in m.expand("tiny"):
        key, run = f"t-track/{spec.run_id}", RunDir(root, m.name, spec.run_id)
        config = storage.get_run_config("repro", run_id=key)
        assert config["_Group"] == "t-track" and config["limit"] == spec.cell["model.span.limit"]
        assert config["model.span.limit"] == spec.model.span.limit and config["train.lr"] == spec.train.lr
        assert config["run_id"] == spec.run_id and config["code_version"] == run.spec()["code_version"]
        logs = storage.get_logs("repro", run_id=key)
        metrics = run.metrics()
        assert [log["step"] for log in logs] == list(metrics["step"])
        assert [log["train/bits"] for log in logs] == pytest.approx(list(metrics["train/bits"]))
        assert logs[-1]["summary/test_bits"] == pytest.approx(run.summary()["test_bits"])
        assert "model/spans/layer0" in logs[0] and "model/spans/0/0" not in logs[0]


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


def test_dashboard_shows_the_manifests_runs_in_a_browser(store, chromium, tmp_path):
    m = manifests.load(store.manifest)
    proc = subprocess.Popen(
        [sys.executable, "-m", "repro", "dashboard", str(store.manifest), "--port", str(_free_port())],
        env=store.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = _Output(proc)
    try:
        url = output.wait_for("dashboard: ", 120)
        dom = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                f"--user-data-dir={tmp_path / 'chromium'}",
                "--virtual-time-budget=20000",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        ).stdout
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    printed = output.text()
    assert proc.returncode == 0 and "dashboard stopped" in printed, printed
    assert "imported 2 run(s), 0 already there, 0 unfinished" in printed
    for spec in m.expand("tiny"):
        assert f"t-track tiny limit={spec.cell['model.span.limit']} ({spec.run_id[:6]})" in dom
    assert 'data-metric="train/bits"' in dom  # a line plot of the training curves
    assert "bar-plot" in dom and 'data-metric="summary/test_bits"' in dom  # the summary, one bar per run
