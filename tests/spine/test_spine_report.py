from repro.cli import main
from repro.report import short_names


def test_a_manifest_without_base_trains_nothing_and_still_reports(tmp_path, capsys):
    path = tmp_path / "pic.yaml"
    path.write_text("name: pic\ntitle: A picture\npaper: suite\nrenders: []\n")
    assert main(["validate", str(path)]) == 0
    assert main(["run", str(path)]) == 0
    assert "trains nothing" in capsys.readouterr().out
    assert not (tmp_path / "results" / "runs").exists()
    assert main(["report", str(path)]) == 0
    assert "needs no training" in (tmp_path / "results" / "reports" / "pic.md").read_text()


def test_grid_without_base_is_refused(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ntitle: t\npaper: suite\ngrid: {model.layers: [1, 2]}\n")
    assert main(["validate", str(path)]) == 2
    assert "base: required" in capsys.readouterr().err


def test_short_names_keep_full_keys_only_where_they_collide():
    assert short_names(["model.span.kind", "model.span.limit", "data.name", "model.name"]) == {
        "model.span.kind": "kind", "model.span.limit": "limit", "data.name": "data.name", "model.name": "model.name"}
