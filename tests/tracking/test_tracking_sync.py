"""`repro sync` against a stand-in `wandb` executable (no network): skips what is synced, passes
entity/project and a self-hosted server through, reports failures."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import textwrap

from repro.cli import main
from repro.track.loggers import has_credentials

FAKE_WANDB = """\
#!{python}
import json, os, pathlib, sys
log = pathlib.Path({log!r})
calls = json.loads(log.read_text()) if log.exists() else []
calls.append({{"argv": sys.argv[1:], "base_url": os.environ.get("WANDB_BASE_URL")}})
log.write_text(json.dumps(calls))
if os.environ.get("FAKE_WANDB_FAIL"):
    sys.exit(1)
for arg in sys.argv[1:]:
    for run_log in pathlib.Path(arg).glob("*.wandb"):
        run_log.with_suffix(".wandb.synced").touch()
"""


def test_sync_uploads_each_offline_run_once(store, tmp_path, monkeypatch, capsys):
    root = tmp_path / "results"
    shutil.copytree(store.root / "wandb", root / "wandb", symlinks=True)
    folders = sorted((root / "wandb").glob("offline-run-*"))
    done_before = folders[0]
    next(done_before.glob("*.wandb")).with_suffix(".wandb.synced").touch()
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.json"
    bin_dir.mkdir()
    fake = bin_dir / "wandb"
    fake.write_text(textwrap.dedent(FAKE_WANDB.format(python=sys.executable, log=str(log))))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("REPRO_RESULTS", str(root))
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")

    monkeypatch.setenv("FAKE_WANDB_FAIL", "1")
    assert main(["sync"]) == 1  # the upload failed: every pending run is reported as failed
    assert capsys.readouterr().out.count("FAILED") == len(folders) - 1
    monkeypatch.delenv("FAKE_WANDB_FAIL")

    assert main(["sync", "--entity", "me", "--project", "proj"]) == 0
    out = capsys.readouterr().out
    assert f"skipped {done_before} (already synced)" in out
    assert all(f"synced {folder}" in out for folder in folders[1:])
    call = json.loads(log.read_text())[-1]
    assert call["argv"] == ["sync", "--entity", "me", "--project", "proj", *map(str, folders[1:])]
    assert call["base_url"] == "https://wandb.example.org"

    assert main(["sync"]) == 0  # everything is synced now: the W&B CLI is not called again
    assert len(json.loads(log.read_text())) == 2
    assert f"synced 0, skipped {len(folders)} already synced, failed 0" in capsys.readouterr().out


def test_credentials_are_looked_up_for_the_self_hosted_host(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine wandb.example.org\n  login user\n  password secret\n")
    netrc.chmod(0o600)
    assert not has_credentials()  # api.wandb.ai has no entry
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    assert has_credentials()
