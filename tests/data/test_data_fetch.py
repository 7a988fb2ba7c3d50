"""Downloads against a local HTTP server (127.0.0.1) that can honour or ignore ranges and drop connections."""

import hashlib
import http.server
import threading

import pytest

from repro.data.errors import ChecksumMismatch, DataError
from repro.data.fetch import Pin, download

PAYLOAD = bytes(range(256)) * 400  # 102,400 bytes


class Server(http.server.ThreadingHTTPServer):
    payload = PAYLOAD
    honour_range = True
    drop_after: int | None = None  # send only this many body bytes, then close
    range_total = False  # a 416 states the whole size (Content-Range: bytes */N)
    requests: list


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        rng = self.headers.get("Range")
        srv.requests.append(rng)
        start = int(rng.split("=")[1].rstrip("-")) if rng and srv.honour_range else 0
        if start >= len(srv.payload):
            self.send_response(416)
            if srv.range_total:
                self.send_header("Content-Range", f"bytes */{len(srv.payload)}")
            self.end_headers()
            return
        body = srv.payload[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if srv.drop_after is not None:
            body, srv.drop_after = body[: srv.drop_after], None
        self.wfile.write(body)


@pytest.fixture
def server():
    srv = Server(("127.0.0.1", 0), Handler)
    srv.requests = []
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/archive.zip"


GOOD = Pin(len(PAYLOAD), hashlib.sha256(PAYLOAD).hexdigest())


def test_download_verifies_and_renames(server, tmp_path):
    dest = download(url(server), tmp_path / "a.zip", GOOD)
    assert dest.read_bytes() == PAYLOAD and not (tmp_path / "a.zip.part").exists()
    download(url(server), dest, GOOD)  # already there and verified: no new request
    assert server.requests == [None]


def test_interrupted_download_resumes_with_a_range_request(server, tmp_path):
    server.drop_after = 30_000
    with pytest.raises(DataError, match="rerun to resume"):
        download(url(server), tmp_path / "a.zip", GOOD)
    have = (tmp_path / "a.zip.part").stat().st_size
    assert have == 30_000 and not (tmp_path / "a.zip").exists()
    download(url(server), tmp_path / "a.zip", GOOD)
    assert (tmp_path / "a.zip").read_bytes() == PAYLOAD
    assert server.requests == [None, "bytes=30000-"]


def test_server_ignoring_range_restarts_cleanly(server, tmp_path):
    (tmp_path / "a.zip.part").write_bytes(b"garbage from an older attempt")
    server.honour_range = False
    download(url(server), tmp_path / "a.zip", GOOD)
    assert (tmp_path / "a.zip").read_bytes() == PAYLOAD


def test_complete_part_file_needs_no_more_bytes(server, tmp_path):
    (tmp_path / "a.zip.part").write_bytes(PAYLOAD)
    download(url(server), tmp_path / "a.zip", GOOD)
    assert server.requests == [] and (tmp_path / "a.zip").read_bytes() == PAYLOAD


def test_checksum_mismatch_names_both_hashes_and_discards_the_file(server, tmp_path):
    wrong = Pin(len(PAYLOAD), "f" * 64)
    with pytest.raises(ChecksumMismatch) as e:
        download(url(server), tmp_path / "a.zip", wrong)
    assert GOOD.digest in str(e.value) and "f" * 64 in str(e.value)
    assert list(tmp_path.iterdir()) == []
    assert download(url(server), tmp_path / "a.zip", wrong, allow_unverified=True).read_bytes() == PAYLOAD


def test_size_mismatch_is_reported_as_sizes(server, tmp_path):
    with pytest.raises(
        ChecksumMismatch, match=f"sha256 {GOOD.digest}, expected {GOOD.digest}; size 102,400 bytes, expected 5"
    ):
        download(url(server), tmp_path / "a.zip", Pin(5, GOOD.digest))


def test_unreachable_server_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="download of http://127.0.0.1:9/x failed"):
        download("http://127.0.0.1:9/x", tmp_path / "x", GOOD, timeout=5)


def test_prepare_downloads_into_the_cache_and_resumes(server, root, tmp_path, monkeypatch, pin):
    import zipfile

    import repro.data as data
    from repro.data import text

    content = bytes(range(256)) * 40
    z = tmp_path / "enwik8.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("enwik8", content)
    server.payload, server.drop_after = z.read_bytes(), 1000
    monkeypatch.setattr(text, "mahoney_url", lambda name: url(server))
    monkeypatch.setitem(text.MAHONEY, "enwik8", (pin(z.read_bytes()), pin(content)))
    with pytest.raises(DataError, match="rerun to resume"):
        data.prepare("enwik8")
    assert not (root / "enwik8").exists()
    data.prepare("enwik8")
    assert (root / "downloads" / "enwik8.zip").read_bytes() == z.read_bytes()
    assert server.requests == [None, "bytes=1000-"] and data.verify("enwik8") == []


def test_a_file_without_a_published_hash_downloads_resumably_and_is_checked_before_its_rename(server, tmp_path):
    """pin None (the official adaptive-span checkpoints: no hash published): only a whole download that the
    caller's check passes lies under the final name (the caller records its hash); one already there is
    refused, never reused (nothing says it is whole)."""
    server.drop_after = 30_000
    with pytest.raises(DataError, match="rerun to resume"):
        download(url(server), tmp_path / "a.pt", None)
    assert not (tmp_path / "a.pt").exists()  # only a whole file lies under the final name
    checked = []
    assert download(url(server), tmp_path / "a.pt", None, complete=checked.append).read_bytes() == PAYLOAD
    assert server.requests == [None, "bytes=30000-"] and checked == [tmp_path / "a.pt.part"]
    with pytest.raises(DataError, match="a.pt: already there, but no hash was recorded for it"):
        download(url(server), tmp_path / "a.pt", None)
    assert len(server.requests) == 2 and (tmp_path / "a.pt").read_bytes() == PAYLOAD


def test_an_unpinned_download_its_check_refuses_is_deleted(server, tmp_path):
    def refuse(part):
        raise DataError(f"{part}: not a checkpoint")

    with pytest.raises(DataError, match="a.pt.part: not a checkpoint"):
        download(url(server), tmp_path / "a.pt", None, complete=refuse)
    assert list(tmp_path.iterdir()) == []


def test_an_unpinned_download_of_another_size_than_the_server_states_is_deleted(server, tmp_path):
    """A part left longer than the file (the server answers its range with 416 and the whole size)."""
    (tmp_path / "a.pt.part").write_bytes(PAYLOAD + b"more")
    server.range_total = True
    with pytest.raises(DataError, match="102,404 bytes, but the server states 102,400; deleted"):
        download(url(server), tmp_path / "a.pt", None)
    assert list(tmp_path.iterdir()) == []
