"""A researcher's first day, round four (issue 62, points 1-4 and 6-9): what the README, the errors and the
reports promise a new user, each checked against what the suite does."""

from __future__ import annotations

from repro.cli import main


def test_validate_names_the_scale_whose_grid_cell_failed(write_manifest, capsys):
    """Issue 62.4: `model.c: got 32; ... (grid cell stride=16)` came from the `paper` scale, unnamed."""
    path = write_manifest()
    text = path.read_text().replace(
        "  tiny: {}\n", "  tiny: {}\n  paper:\n    train: {final_phase: 90}\n    grid:\n      model.stride: [16]\n"
    )
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "train.final_phase: got 90; allowed: <= train.steps = 30 (scale paper, grid cell stride=16)" in err
