"""Faults of the released checkpoints' downloads and of imported files (issue 62), in real ``python -m
repro`` processes: one line on stderr, exit status 2, no traceback, nothing recorded or written."""

from __future__ import annotations

import http.server
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch
from officialkit import CHECKPOINT, OVERRIDES, edited_checkpoint

from repro.pretrained import released

pytestmark = pytest.mark.faults

SHRINK = ["model.layers=2", "model.d_model=32", "model.d_ff=64", "model.heads=4", "model.span.limit=512"]
# as-table1's adaptive-small at scale pretrained, shrunk to the fixture: its weights are the released text8.pt
RUN_PRETRAINED = [
    "run",
    "as-table1",
    "--scale",
    "pretrained",
    "--allow-read",
    str(CHECKPOINT.parent),
    "--only",
    "variant=adaptive-small",
    *OVERRIDES,
    *SHRINK,
]


def repro(argv: list[str], **kwargs) -> subprocess.Popen:
    """``python -m repro ARGV`` in a fresh interpreter (the test's environment: its own data and results)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-m", "repro", *argv]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kwargs)


def one_line(argv: list[str]) -> str:
    """``repro ARGV`` exits 2 with one line on stderr, no traceback: that line."""
    child = repro(argv)
    _, err = child.communicate(timeout=300)
    lines = err.strip().splitlines()
    assert child.returncode == 2 and len(lines) == 1 and "Traceback" not in err, (child.returncode, err)
    return lines[0]


def results() -> Path:
    return Path(os.environ["REPRO_RESULTS"])


# -- 62.12: only a download completed here is recorded -----------------------------------------------


def test_half_a_released_checkpoint_under_its_final_name_is_refused_never_recorded(monkeypatch):
    """Half of text8.pt under its final name, no hash recorded for it and the server unreachable: before,
    it was taken as the first download and its sha256 recorded (a real download refused from then on)."""
    monkeypatch.setenv(released.URL_ROOT_ENV, "http://127.0.0.1:9")  # nothing listens on the discard port
    folder = released.folder()
    folder.mkdir(parents=True)
    half = CHECKPOINT.read_bytes()[: CHECKPOINT.stat().st_size // 2]
    (folder / "text8.pt").write_bytes(half)
    record = folder / released.RECORD
    record.write_text('{"enwik8": {"sha256": "00", "size": 1, "url": "u"}}\n')  # another file's, kept as it is
    before = record.read_bytes()
    line = one_line(RUN_PRETRAINED)
    assert line.startswith(f"error: {folder / 'text8.pt'}: already there, but no hash was recorded for it"), line
    assert "not trusted: delete it to download http://127.0.0.1:9/text8.pt again" in line
    assert record.read_bytes() == before and (folder / "text8.pt").read_bytes() == half
    assert not results().exists()


class Held(http.server.BaseHTTPRequestHandler):
    """Serves the fixture's checkpoint as text8.pt: half of it, then holds the connection until released
    (whole, ignoring any range, once ``server.whole`` is set)."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = CHECKPOINT.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.server.whole:
            self.wfile.write(body)
            return
        self.wfile.write(body[: len(body) // 2])
        self.wfile.flush()
        self.server.halfway.set()
        self.server.release.wait(60)


@pytest.fixture
def held(monkeypatch):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Held)
    srv.halfway, srv.release, srv.whole = threading.Event(), threading.Event(), False
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    monkeypatch.setenv(released.URL_ROOT_ENV, f"http://127.0.0.1:{srv.server_address[1]}")
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def test_a_download_killed_half_way_leaves_no_file_under_its_final_name_and_records_nothing(held):
    part = released.folder() / "text8.pt.part"
    child = repro(RUN_PRETRAINED)
    try:
        assert held.halfway.wait(240), "the download never started"
        deadline = time.monotonic() + 60
        while not part.exists():  # the child opens its part once the response has begun
            assert time.monotonic() < deadline and child.poll() is None, "no part file"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == -signal.SIGKILL
    assert sorted(p.name for p in part.parent.iterdir()) == [part.name]  # resumable, not trusted
    held.whole = True
    lines: list[str] = []
    assert released.fetch("text8", lines.append).read_bytes() == CHECKPOINT.read_bytes()
    assert released.recorded()["text8"]["size"] == CHECKPOINT.stat().st_size and "recorded" in lines[-1]


# -- 62.16: hostile shapes are bounded before anything is allocated from them ------------------------


def billion_positions(model: dict) -> None:
    """S = 10^9 declared by stride-0 views of one element each: a file of the fixture's size."""
    model["module.key_pe"] = torch.zeros(1).expand(1, 8, 10**9)
    for i in (0, 1):
        model[f"module.layers.{i}.attn.attn.adaptive_span._mask.mask_template"] = torch.zeros(1).expand(10**9)


@pytest.mark.parametrize(
    "edit, expected",
    [
        (  # before: a loop over 10^11 layers (no end in sight)
            lambda m: m.update({"module.layers.100000000000.attn.proj_query.weight": torch.zeros(32, 32)}),
            "model key 'layers.100000000000.attn.proj_query.weight': layer index '100000000000'; allowed: 0 to 1023",
        ),
        (  # before: out of memory (a 4 GB template and the checks' temporaries)
            billion_positions,
            "model key 'key_pe' has shape (1, 8, 1000000000): the span limit S = 1,000,000,000; allowed: 1 to "
            "1,048,576",
        ),
    ],
    ids=["layer-1e11", "stride0-S-1e9"],
)
def test_a_shape_that_hung_or_exhausted_memory_is_one_line_naming_the_file_key_and_value(tmp_path, edit, expected):
    """In real processes: the fault they had was the process's (a hang, out of memory). The other hostile
    shapes: test_official_cli.py::test_a_checkpoint_of_another_shape_is_one_line_naming_the_key."""
    path = edited_checkpoint(tmp_path, edit)
    assert path.stat().st_size < 2 * CHECKPOINT.stat().st_size
    line = one_line(["import", "official", str(path), *OVERRIDES])
    assert line.startswith(f"error: {path}: ") and expected in line, line
    assert not results().exists()


# -- 62.18: what torch says and what the path is ------------------------------------------------------


def protocol_4(tmp_path: Path) -> Path:
    """A plain pickle of protocol 4 (torch writes 2): torch warns in two lines before it refuses it."""
    path = tmp_path / "protocol4.pt"
    path.write_bytes(pickle.dumps({"model": {}, "iter_no": 1}, protocol=4))
    return path


def zip_bomb(tmp_path: Path) -> Path:
    """A torch-format zip whose storage member inflates 1,000-fold (256 MiB of zeros in 256 KB), its
    pickle of protocol 4, as one written by hand."""
    path = tmp_path / "bomb.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"model": {}, "iter_no": 1}, protocol=4))
        z.writestr("archive/version", "3\n")
        member = zipfile.ZipInfo("archive/data/0")
        member.compress_type = zipfile.ZIP_DEFLATED
        with z.open(member, "w") as f:
            for _ in range(256):
                f.write(bytes(1 << 20))
    return path


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.pt"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    "make, expected",
    [
        (protocol_4, "not a torch checkpoint (torch's weights-only unpickler cannot read it)"),
        (zip_bomb, "not a torch checkpoint (torch's weights-only unpickler cannot read it)"),
        (fifo, "is not a regular file (a FIFO); expected an official adaptive-span checkpoint (.pt)"),
    ],
    ids=["protocol-4", "zip-bomb", "fifo"],
)
def test_a_file_torch_warns_about_or_no_regular_file_is_one_line(tmp_path, make, expected):
    """Before: torch's two-line UserWarning, then the line; a FIFO "no such file"."""
    path = make(tmp_path)
    assert one_line(["import", "official", str(path)]) == f"error: {path}: {expected}"
