"""What scoring the released weights costs, said before it starts (issue 62 point 2): `repro run as-table1
--scale pretrained` failed first on the data, and neither that error nor `--dry-run` said that the run
downloads text8.pt and text8_large.pt, that scoring them takes days on 2 CPU cores, or that `--limit-bytes`
gives a quick look."""

from __future__ import annotations

from pathlib import Path

from repro.cli import main
from repro.pretrained import released

RUN = ["run", "as-table1", "--scale", "pretrained"]


def _note(capsys, *argv: str) -> str:
    assert main([*RUN, "--dry-run", *argv]) == 0
    (note,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("released weights: ")]
    return note


def test_the_dry_run_names_the_downloads_the_days_and_the_quick_look(capsys, tmp_path: Path):
    folder = tmp_path / "data" / "downloads" / "adaptive-span"
    note = _note(capsys)
    assert note.startswith(
        f"released weights: this command downloads text8.pt and text8_large.pt from {released.URL_ROOT}/ into {folder}/; "
        "scoring valid and test, 5M tokens each, by two protocols takes text8.pt about 3 days, text8_large.pt about "
        "17 days on 2 CPU cores"
    )
    assert note.endswith("; `--limit-bytes N` scores each split's first N tokens for a quick look")
    # a file downloaded before is not downloaded again; a quick look is timed as one and offers no other
    folder.mkdir(parents=True)
    (folder / "text8.pt").write_bytes(b"downloaded before")
    note = _note(capsys, "--limit-bytes", "20000")
    assert note.startswith(
        f"released weights: this command downloads text8_large.pt from {released.URL_ROOT}/ into {folder}/ "
        "(text8.pt already there); scoring each split's first 20,000 tokens (--limit-bytes) takes text8.pt about "
        "20 minutes, text8_large.pt about 98 minutes on 2 CPU cores"
    )
    assert "--limit-bytes N" not in note


def test_a_dry_run_that_scores_no_released_weights_says_nothing_of_them(capsys):
    assert main(["run", "as-table1", "--dry-run"]) == 0
    assert "released weights" not in capsys.readouterr().out


def test_the_data_not_prepared_error_names_its_command_then_what_the_run_does(capsys, tmp_path: Path):
    assert main([*RUN, "--no-wandb"]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(
        f"error: dataset 'text8' is not prepared in {tmp_path / 'data'}; run `repro data prepare text8`; then this "
        "command downloads text8.pt and text8_large.pt from "
    )
    assert "text8.pt about 3 days, text8_large.pt about 17 days on 2 CPU cores" in line
    assert line.endswith("`--limit-bytes N` scores each split's first N tokens for a quick look")
    assert not (tmp_path / "results" / "runs").exists() and not (tmp_path / "data" / "downloads").exists()
