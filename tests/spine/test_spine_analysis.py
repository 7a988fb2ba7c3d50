"""Renderers are files: the shipped ones in analysis/, a manifest's own named by its `analysis:` key; and
the commands that only read manifests and the store never import torch."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from repro.cli import main
from repro.report import renderers
from repro.store.runs import table

USER_RENDERER = '''
import pandas as pd

from repro.report.renderers import Context, renderer


@renderer("squares", reference={"sides": list})
def squares(ctx: Context):
    """Each side of the manifest's reference with its square."""
    sides = ctx.reference("sides")
    frame = pd.DataFrame({"side": sides, "area": [s * s for s in sides]})
    return [(ctx.write_table("squares", frame, "Squares"), "the squares")]
'''

MANIFEST = """
name: user-squares
title: Squares from a renderer of the user's
paper: none
analysis: {file}
renders: [squares]
reference:
  sides: [1, 2, 3]
"""

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "results"  # the committed run store, read only
STUDIES = REPO / "analysis" / "studies"


def _run_study(name: str, out: Path) -> str:
    """``analysis/studies/<name>.py`` run as a script on the committed store: the page it wrote to ``out``."""
    argv = [sys.executable, str(STUDIES / f"{name}.py"), "--results", str(STORE), "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out.read_text()


def _user_manifest(folder: Path, renderer_text: str = USER_RENDERER, name: str = "mine.py") -> Path:
    (folder / "figs").mkdir(parents=True)
    (folder / "figs" / name).write_text(renderer_text)
    path = folder / "squares.yaml"
    path.write_text(MANIFEST.format(file=f"figs/{name}"))
    return path


def test_every_shipped_renderer_comes_from_a_file_of_analysis():
    known = renderers.registry()
    files = {Path(fn.__code__.co_filename).resolve() for fn in known.values()}
    assert files == {p.resolve() for p in renderers.analysis_root().glob("*.py") if not p.name.startswith("_")}
    assert {"curves", "as-fig2", "st-table1"} <= set(known)


def test_a_file_of_analysis_named_with_an_underscore_is_no_renderer_file(tmp_path):
    """A ``_`` file beside the renderer files (a helper they may share) is neither read for the renderers it
    declares nor run: a fresh process with $REPRO_ANALYSIS on a folder holding one of each."""
    (tmp_path / "mine.py").write_text(USER_RENDERER)
    (tmp_path / "_shared.py").write_text(
        "from repro.report.renderers import renderer\n\n\n@renderer('hidden')\ndef hidden(ctx):\n    return []\n"
    )
    code = textwrap.dedent(
        """
        from repro.config import renderer_names
        from repro.report import renderers
        declared = {name for path in renderer_names.shipped() for name in renderer_names.declared(path)}
        print([p.name for p in renderer_names.shipped()], sorted(declared), sorted(renderers.registry()))
        """
    )
    env = {**os.environ, "REPRO_ANALYSIS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['mine.py'] ['squares'] ['squares']"


def test_a_manifest_renders_with_its_own_renderer_file(tmp_path, capsys, monkeypatch):
    """The file is found relative to the manifest (not the working directory), its reference key is
    accepted because it declares it, and `repro report` writes what it draws."""
    path = _user_manifest(tmp_path / "mine")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", str(path)]) == 0
    assert main(["report", str(path), "--results", str(tmp_path / "results")]) == 0
    capsys.readouterr()
    table = pd.read_csv(tmp_path / "results" / "reports" / "tables" / "user-squares-squares-none.csv")
    assert table.to_dict("list") == {"side": [1, 2, 3], "area": [1, 4, 9]}
    assert "squares" not in renderers.registry()  # another manifest does not see it


@pytest.mark.parametrize(
    "text, name, expected",
    [
        (USER_RENDERER, "missing.py", "analysis: figs/missing.py: no such renderer file"),
        ("raise RuntimeError('half written')\n", "mine.py", "the renderer file does not load: RuntimeError: half"),
        (
            USER_RENDERER.replace('"squares", ', '"st-table1", '),
            "mine.py",
            "renderer 'st-table1' is already defined in",
        ),
    ],
)
def test_a_bad_renderer_file_is_one_line_naming_it(tmp_path, capsys, text, name, expected):
    path = _user_manifest(tmp_path, text)
    if name == "missing.py":
        path.write_text(MANIFEST.format(file="figs/missing.py"))
    assert main(["validate", "--renderers", str(path)]) == 2  # --renderers: the file is loaded (run)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err


@pytest.mark.parametrize("argv", [["list"], ["validate"], ["show", "smoke"], ["report", "smoke", "--results", "{tmp}"]])
def test_reading_manifests_and_the_store_imports_no_torch(tmp_path, argv):
    """`list`, `validate`, `show` and `report` (of a manifest whose renderers need no model function)
    check manifests against the torch-free schemas of repro.config: a fresh process, then sys.modules."""
    argv = [a.format(tmp=tmp_path / "results") for a in argv]
    code = textwrap.dedent(
        f"""
        import sys
        from repro.cli import main
        rc = main({argv!r})
        print(rc, sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "lightning"))))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []"


def test_the_cpu_scale_study_writes_its_tables_from_the_store(tmp_path):
    """The study reads the committed store across manifests (not a report: outside reports/); each row of
    its `cpu` table is the stored seed-0 run's summary, once, however many replicates are stored."""
    text = _run_study("cpu_scale", tmp_path / "cpu-scale.md")
    store = renderers.finished_runs(table(STORE))
    run = store[(store["manifest"] == "as-fig3") & (store["model.span.kind"] == "fixed")]
    run = run[(run["scale"] == "cpu") & (run["model.span.limit"] == 1024) & (run["train.seed"] == 0)].iloc[0]
    row = next(line for line in text.splitlines() if line.startswith("| fixed S = 1024 |"))
    labels = [line.split("|")[1] for line in text.splitlines() if line.startswith("| adaptive S = 8192")]
    assert len(labels) == len(set(labels)) == 2  # as-table1's small and large cells, seed 0 only
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:4] == [renderers.format_value(run["valid_bits"]), renderers.format_value(run["test_bits"])]
    assert cells[6] == f"{run['flops_per_token'] / 1e6:.2f}M"


@pytest.mark.parametrize(
    "argv, runs_renderers",
    [
        (["run", "smoke", "--dry-run"], False),
        (["show", "table1"], False),
        (["status", "smoke"], False),
        (["list"], False),
        (["validate"], False),
        (["report", "smoke"], True),
    ],
)
def test_only_report_runs_the_shipped_renderer_files(tmp_path, argv, runs_renderers):
    """Every command checks a manifest's renderers from their files' source; only `report` (and `validate
    --renderers`) runs the files: a fresh process, then sys.modules."""
    code = textwrap.dedent(
        f"""
        import sys
        from repro.cli import main
        rc = main(["--results", {str(tmp_path / "results")!r}, *{argv!r}])
        print(rc, any(m.startswith("analysis.") for m in sys.modules))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"0 {runs_renderers}"


def _study_module(name: str):
    import importlib.util

    path = STUDIES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_context_pilot_decides_by_its_declared_margin():
    """A screen passes only when S = 512 is at least 0.05 below S = 64; a missing arm keeps it open; an
    adopted run costs nothing; the decision names what passed, what is open, or that none qualifies."""
    study = _study_module("cpu_context")

    def run(bits, seconds=3600.0, reused=None):
        return pd.Series({"test_bits": bits, "train_seconds": seconds, "eval_seconds": 0.0, "reused_from": reused})

    passes = study.screen_row("a", "", run(2.60), run(2.55))
    fails = study.screen_row("b", "", run(2.60), run(2.551))
    open_ = study.screen_row("c", "", run(2.60, reused="as-fig3/x"), None)
    assert (passes["decision"], fails["decision"], open_["decision"]) == ("passes", "fails", "not trained yet")
    assert passes["512 - 64"] == "-0.050" and passes["CPU-hours"] == "2.00" and open_["CPU-hours"] == "0.00"
    assert "Passed the screen: a." in study.decision([passes, fails])
    assert "1 not trained yet (c)" in study.decision([fails, open_])
    assert "No candidate qualifies" in study.decision([fails])


def test_the_context_pilot_page_reads_the_store(tmp_path):
    """Run on the committed store, the page's linux-doc screen is as-fig3's seed-0 fixed runs (adopted)."""
    text = _run_study("cpu_context", tmp_path / "cpu-context.md")
    store = renderers.finished_runs(table(STORE))
    fixed = store[(store["manifest"] == "as-fig3") & (store["scale"] == "cpu") & (store["train.seed"] == 0)]
    fixed = fixed[fixed["model.span.kind"] == "fixed"].set_index("model.span.limit")["test_bits"]
    row = next(line for line in text.splitlines() if line.startswith("| linux-doc | prose"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:5] == [
        renderers.format_value(fixed[64]),
        renderers.format_value(fixed[512]),
        f"{fixed[512] - fixed[64]:+.3f}",
    ]
    assert cells[5] == "fails"
