"""`repro import official` and `repro run NAME --scale pretrained` end to end on the official fixture:
the stored run, its numbers, the refusals (one line, exit 2, nothing written), and the released models'
downloads against a local server (their hash recorded on the first, checked on every later one)."""

from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path

import pytest
import torch
from officialkit import CHECKPOINT, OFFICIAL, OVERRIDES, edited_checkpoint

from repro.cli import main
from repro.data.errors import ChecksumMismatch, DataError
from repro.pretrained import released


def cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def results(tmp_path: Path) -> Path:
    return Path(os.environ["REPRO_RESULTS"])


def stored(root: Path, manifest: str) -> tuple[dict, dict]:
    (run,) = sorted((root / "runs" / manifest).iterdir())
    import yaml

    return yaml.safe_load((run / "spec.yaml").read_text()), json.loads((run / "summary.json").read_text())


def test_import_scores_both_protocols_and_stores_a_run(capsys, tmp_path):
    code, out, err = cli(capsys, "import", "official", str(CHECKPOINT), *OVERRIDES)
    assert code == 0, err
    spec, summary = stored(results(tmp_path), "official-import")
    for split in ("valid", "test"):
        assert abs(summary[f"{split}_bits"] / OFFICIAL[f"{split}_bits"] - 1) < 1e-6
        assert summary[f"{split}_bits_suite"] > 0 and summary[f"{split}_targets_suite"] == 3999
    assert spec["scale"] == "pretrained" and spec["train"]["weights"] == {
        "source": "official",
        "name": None,
        "sha256": OFFICIAL["sha256"]["tiny8.pt"],
    }
    assert (spec["model"]["layers"], spec["model"]["d_model"], spec["model"]["span"]["limit"]) == (2, 32, 512)
    assert spec["model"]["mask_norm"] == "official" and summary["official_vocabulary"] == OFFICIAL["vocabulary"]
    assert summary["status"] == "finished" and summary["weights_iter_no"] == 19
    assert f"valid: {summary['valid_bits']:.6f} bits (official protocol)" in out
    code, out, _ = cli(capsys, "status")
    assert code == 0 and "pretrained  finished" in out


def test_limit_bytes_scores_a_prefix_as_a_run_of_its_own(capsys, tmp_path):
    code, out, err = cli(capsys, "import", "official", str(CHECKPOINT), *OVERRIDES, "--limit-bytes", "1500")
    assert code == 0, err
    spec, summary = stored(results(tmp_path), "official-import")
    assert spec["eval"]["prefix"] == 1500 and summary["eval_prefix"] == 1500
    assert summary["valid_targets"] == 2 * 8 * 64 and summary["valid_targets_suite"] == 1499  # 1,500 tokens
    assert "(the first 1,500 tokens of each split only)" in out


def permuted_rows(model: dict) -> None:
    """The embeddings' rows in another order (a wrong symbol numbering): the fit check must catch it."""
    for key in ("module.in_emb.weight", "module.out_emb.weight", "module.out_emb.bias"):
        model[key] = model[key].roll(5, 0)


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda m: m.pop("module.layers.1.norm2.bias"), "model key 'layers.1.norm2.bias' is missing"),
        (lambda m: m.update({"module.layers.0.attn.bias": torch.zeros(3)}), "'layers.0.attn.bias' is not a key of"),
        (lambda m: m.update({"module.out_emb.bias": torch.zeros(27)}), "'out_emb.bias' has shape (27,)"),
        (
            lambda m: m.update({"module.layers.0.attn.attn.persistent_memory.key": torch.zeros(4, 8, 16)}),
            "a persistent-memory model (--pers-mem-size)",
        ),
        (lambda m: m.update({"layers.0.ff.fc1.bias": torch.zeros(64)}), "lacks the 'module.' prefix"),
        (permuted_rows, "no better than its unigram level"),
        (  # before: ZeroDivisionError traceback
            lambda m: m.update({"module.key_pe": torch.zeros(1, 0, 512)}),
            "model key 'key_pe' has shape (1, 0, 512): d_h = 0; allowed: 1 to 32",
        ),
        (
            lambda m: m.update({"module.layers.0.ff.fc1.weight": torch.zeros(0, 32)}),
            "model key 'layers.0.ff.fc1.weight' has shape (0, 32): the feed-forward width F = 0; allowed: 1 to 65,536",
        ),
        (  # within every bound, but its 28 x 32 elements are one number repeated (stride 0)
            lambda m: m.update({"module.in_emb.weight": torch.zeros(1).expand(28, 32)}),
            "model key 'in_emb.weight' has shape (28, 32) with strides (0, 0): its 896 elements are not in the file",
        ),
    ],
)
def test_a_checkpoint_of_another_shape_is_one_line_naming_the_key(capsys, tmp_path, edit, expected):
    code, _, err = cli(capsys, "import", "official", str(edited_checkpoint(tmp_path, edit)), *OVERRIDES)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and expected in err, err
    assert not results(tmp_path).exists()  # nothing written


def test_a_pickle_that_needs_code_is_refused_never_run(capsys, tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "hook": os.system}, path)
    code, _, err = cli(capsys, "import", "official", str(path), *OVERRIDES)
    assert code == 2 and "refused to load: it holds a reference to" in err and "system" in err
    assert not results(tmp_path).exists()


@pytest.mark.parametrize(
    "args, expected",
    [
        (["model.layers=3"], "model.layers: 3, but tiny8.pt needs 2"),
        (["model.window=self_and_past"], "model.window: 'self_and_past', but tiny8.pt needs 'past'"),
        (["model.span.kind=dynamic"], "model.mask_norm: got 'official'"),
    ],
)
def test_a_spec_the_tensors_contradict_is_refused(capsys, tmp_path, args, expected):
    code, _, err = cli(capsys, "import", "official", str(CHECKPOINT), *OVERRIDES, *args)
    assert code == 2 and expected in err, err
    assert not results(tmp_path).exists()


def test_not_a_checkpoint(capsys, tmp_path):
    path = tmp_path / "notes.pt"
    path.write_text("not a checkpoint")
    code, _, err = cli(capsys, "import", "official", str(path))
    assert code == 2 and "not a torch checkpoint" in err


@pytest.mark.parametrize(
    "where, expected",
    [
        (lambda tmp: tmp, "is a directory"),
        (lambda tmp: Path("/dev/zero"), "is not a regular file (a device)"),
        (lambda tmp: tmp / "absent.pt", "no such file"),
    ],
    ids=["folder", "dev-zero", "absent"],
)
def test_a_path_that_is_no_checkpoint_file_says_what_is_there(capsys, tmp_path, where, expected):
    """Before: "no such file" for a folder and /dev/zero too (a FIFO: test_official_faults.py)."""
    path = where(tmp_path)
    code, _, err = cli(capsys, "import", "official", str(path))
    assert (code, err) == (2, f"error: {path}: {expected}; expected an official adaptive-span checkpoint (.pt)\n")


# -- the released models: downloads and the pretrained scale ----------------------------------------


@pytest.fixture
def server(tmp_path, monkeypatch):
    """The fixture's checkpoint served as every released file, from a local HTTP server."""
    served = tmp_path / "served"
    served.mkdir()
    for name in released.RELEASED:
        (served / f"{name}.pt").write_bytes(CHECKPOINT.read_bytes())

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    monkeypatch.setenv(released.URL_ROOT_ENV, f"http://127.0.0.1:{srv.server_address[1]}")
    yield served
    srv.shutdown()
    srv.server_close()


def test_the_first_download_records_the_hash_and_later_ones_are_checked_against_it(server):
    lines: list[str] = []
    path = released.fetch("text8", lines.append)
    record = released.recorded()["text8"]
    assert record["sha256"] == OFFICIAL["sha256"]["tiny8.pt"] and "recorded on this first download" in lines[-1]
    assert released.fetch("text8", lines.append) == path  # there and as recorded: no download
    (server / "text8.pt").write_bytes(b"another file")  # the server's copy changed
    path.unlink()
    with pytest.raises(ChecksumMismatch, match=record["sha256"]):
        released.fetch("text8", lines.append)


def test_a_download_that_is_no_checkpoint_is_deleted_never_recorded(server):
    (server / "text8.pt").write_bytes(CHECKPOINT.read_bytes()[:5000])  # whole as served, but no checkpoint
    with pytest.raises(DataError, match="text8.pt is no checkpoint the suite reads .*not a torch checkpoint"):
        released.fetch("text8", print)
    assert released.recorded() == {} and list(released.folder().iterdir()) == []


def test_offline_the_download_is_one_clear_line(monkeypatch):
    monkeypatch.setenv(released.URL_ROOT_ENV, "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(DataError, match="download of http://127.0.0.1:9/text8.pt failed"):
        released.fetch("text8", print)


def test_run_at_scale_pretrained_downloads_imports_scores_and_reports(capsys, tmp_path, server):
    """as-table1's adaptive-small at scale pretrained, shrunk by overrides to the fixture's shape and
    corpus, its weights downloaded from the local server: the official code's bits, then the report's rows."""
    shrink = ["model.layers=2", "model.d_model=32", "model.d_ff=64", "model.heads=4", "model.span.limit=512"]
    where = ["--allow-read", str(CHECKPOINT.parent)]
    args = ["as-table1", "--scale", "pretrained", *where, "--only", "variant=adaptive-small", *OVERRIDES, *shrink]
    code, out, err = cli(capsys, "run", *args)
    assert code == 0, err
    assert "evaluation(s) of pretrained weights" in out and "recorded on this first download" in out
    (manifest,) = [p.name for p in (results(tmp_path) / "runs").iterdir()]
    spec, summary = stored(results(tmp_path), manifest)
    assert spec["train"]["weights"]["name"] == "text8" and summary["weights_sha256"] == OFFICIAL["sha256"]["tiny8.pt"]
    assert abs(summary["test_bits"] / OFFICIAL["test_bits"] - 1) < 1e-6
    code, out, err = cli(capsys, "report", "as-table1", *where, *OVERRIDES, *shrink)
    assert code == 0, err
    reports = results(tmp_path) / "reports"
    table = next(reports.rglob("*table1*pretrained*.md")).read_text()
    assert "the authors' weights (text8.pt)" in table and "official protocol" in table and "their training" in table
    assert "the authors' released weights, not trained here" in next(reports.glob("as-table1*.md")).read_text()
    assert not list(reports.rglob("*curves*"))  # nothing trained: no training curve


def test_the_tables_pretrained_rows_are_the_released_models_with_their_scripts_flags():
    """as-table1 / as-table2 at scale pretrained name the four released files, each with the flags of the
    script that trained it (what the tensors do not hold), and the official variant of the model."""
    from repro.config import manifest as manifests

    seen = set()
    for name in ("as-table1", "as-table2"):
        for spec in manifests.resolve(name).expand("pretrained"):
            r = released.released(spec.train.weights.name)
            seen.add(r.name)
            assert (spec.data.name, spec.data.vocab, spec.data.block) == (r.dataset, r.vocab, r.block)
            assert (spec.model.dropout, spec.model.span.ramp, spec.model.span.loss_coef) == (
                r.dropout,
                r.ramp,
                r.loss_coef,
            )
            assert (spec.train.steps, spec.train.final_phase) == (r.steps, r.final_phase)
            assert (spec.model.window, spec.model.mask_norm, spec.eval.batch_size) == ("past", "official", 8)
            large = r.name.endswith("_large")
            assert (spec.model.layers, spec.model.d_model, spec.model.span.limit) == (
                (24, 768) if large else (12, 512)
            ) + (8192,)
    assert seen == set(released.RELEASED)


@pytest.mark.faults
def test_sigterm_while_scoring_marks_the_run_interrupted_and_the_next_import_scores_it(capsys, tmp_path):
    """A real `repro import` process, signalled once its scoring has begun (after its first progress line):
    exit 143, one line, the run marked interrupted; the same command again scores it to the end."""
    import signal
    import subprocess
    import sys

    argv = [sys.executable, "-m", "repro", "import", "official", str(CHECKPOINT), *OVERRIDES]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in child.stdout:
        if "evaluating valid" in line:
            child.send_signal(signal.SIGTERM)
            break
    _, err = child.communicate(timeout=300)
    assert child.returncode == 143, err
    assert err.strip().splitlines() == [
        f"interrupted by SIGTERM: run {err.split('run ')[1].split()[0]} of official-import marked interrupted; "
        "`repro run` scores it again"
    ]
    _, summary = stored(results(tmp_path), "official-import")
    assert summary["status"] == "interrupted" and "valid_bits" not in summary
    code, _, err = cli(capsys, "import", "official", str(CHECKPOINT), *OVERRIDES)
    assert code == 0, err
    _, summary = stored(results(tmp_path), "official-import")
    assert summary["status"] == "finished" and abs(summary["test_bits"] / OFFICIAL["test_bits"] - 1) < 1e-6
