"""The read-only commands and run selection, on a manifest with a grid (no training)."""

from repro.cli import main


def grid_manifest(write_manifest):
    return write_manifest(grid="grid:\n  model.layers: [1, 2]\n  train.lr: [0.003, 0.001]\n")


def test_show_dry_run_and_only(capsys, write_manifest):
    path = grid_manifest(write_manifest)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("corpus.txt@") == 4 and "model.layers" in out  # the corpus by file name and hash
    assert main(["run", str(path), "--dry-run", "--only", "layers=2"]) == 0
    *out, estimate = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and all("layers=2" in line and "to run" in line for line in out)
    assert estimate.startswith("ETA unknown: no stored run of the same shape as these 2")
    assert main(["run", str(path), "--dry-run", "--only", "heads=2"]) == 2
    assert "matches 0 grid keys" in capsys.readouterr().err


def test_max_steps_makes_a_different_run(capsys, write_manifest):
    path = write_manifest()
    main(["run", str(path), "--dry-run"])
    full = capsys.readouterr().out.split()[0]
    main(["run", str(path), "--dry-run", "--max-steps", "5"])
    note, line, _ = capsys.readouterr().out.splitlines()  # then the ETA
    assert line.split()[0] != full
    assert note.startswith("--max-steps 5: capped runs have run ids of their own, kept out of the manifest's report")
    assert f"`repro report {path} --max-steps 5` reports them, labelled capped" in note


def test_status_list_and_sync_without_runs(capsys, tmp_path):
    assert main(["status"]) == 0
    assert "no stored runs" in capsys.readouterr().out
    assert main(["list"]) == 0
    assert "smoke" in capsys.readouterr().out
    assert main(["sync"]) == 0  # nothing offline to upload
    run = tmp_path / "results" / "runs" / "m" / "abc" / "wandb" / "offline-run-1-xyz"
    run.mkdir(parents=True)
    assert main(["sync"]) == 2  # offline runs but no credentials: say how to log in
    assert "wandb login" in capsys.readouterr().err
