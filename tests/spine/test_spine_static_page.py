"""`repro dashboard --static`: a hand-made store (two cells of two seeds, one of one) compared in one
self-contained HTML file, read back with html.parser."""

from __future__ import annotations

import re
import statistics
from html.parser import HTMLParser

import pytest
from spine_manifests import stored_run, tiny_manifest

from repro.cli import main
from repro.config import manifest as manifests
from repro.track.static_page import ticks

# a title the page must escape
TITLE = "A manifest for the static page <&> its tests"
GRID = "grid:\n  model.heads: [2, 4, 8]\n  train.lr: [0.003]\n"
# per cell (heads): the test bits of its stored seeds; heads=8 has one seed
BITS = {2: [2.605, 2.631], 4: [2.762, 2.7], 8: [2.69]}


class _Page(HTMLParser):
    """What the checks read: the text of the label cells and of the axis ticks, every URL in an attribute."""

    def __init__(self):
        super().__init__()
        self.labels, self.ticks, self.urls, self.text, self._in = [], [], [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.urls += [v for k, v in attrs.items() if k in ("href", "src", "xlink:href") and v]
        self._in = {"label": self.labels, "tick": self.ticks}.get(attrs.get("class") or "")

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in is not None:
            self._in.append(data)


@pytest.fixture
def static_store(tmp_path, corpus, write_manifest):
    path = write_manifest(tiny_manifest(corpus, grid=GRID, name="t-static", title=TITLE), name="t-static.yaml")
    root = tmp_path / "results"
    for spec in manifests.load(path).expand("tiny", seeds=2):
        bits = BITS[spec.cell["model.heads"]]
        if spec.train.seed >= len(bits):
            continue
        run = stored_run(root, spec, test_bits=bits[spec.train.seed], dataset_unit="char")
        if spec.cell["model.heads"] == 2:  # quick validation in one cell only
            run.append_metrics([{"step": 99, "valid/bits_quick": 2.9}, {"step": 199, "valid/bits_quick": 2.8}])
    return path, root


def _sd(bits: list[float]) -> float:
    return statistics.stdev(bits) if len(bits) > 1 else 0.0


def _write(static_store, tmp_path, *args) -> str:
    path, root = static_store
    out = tmp_path / "page.html"
    assert main(["--results", str(root), "dashboard", "--static", str(path), "--out", str(out), *args]) == 0
    return out.read_text(encoding="utf-8")


def test_the_static_page_shows_each_cells_seed_mean_and_sd_on_an_axis_that_spans_them(static_store, tmp_path):
    """Issue 62.6: trackio's bars start at zero (2.605 and 2.762 look alike), show no mean ± sd over seeds and
    cut labels at 120 px. The static page: a dot and whisker a cell on an axis spanning the data, full labels."""
    text = _write(static_store, tmp_path)
    page = _Page()
    page.feed(text)
    page.close()

    assert [label.strip() for label in page.labels] == [f"heads={h} lr=0.003" for h in BITS]
    values = [float(t.replace(",", "")) for t in page.ticks]
    ends = [(statistics.mean(b) - sd, statistics.mean(b) + sd) for b in BITS.values() for sd in [_sd(b)]]
    assert values == sorted(values) and values[0] <= min(ends)[0] and values[-1] >= max(e[1] for e in ends)
    assert values[0] > 2.5  # the axis spans the data, not from zero
    for heads in (2, 4):
        seeds = BITS[heads]
        mean, sd = statistics.mean(seeds), statistics.stdev(seeds)
        assert f"{mean:.4g} ± {sd:.2g}" in text, (heads, mean, sd)
    row = re.search(r"heads=8 lr=0.003</td><td[^>]*>(n=\d+)</td><td[^>]*>([^<]*)</td>", text)
    assert row and row.groups() == ("n=1", "2.69")  # one seed: its value, no whisker
    assert text.count("n=2") >= 2
    assert "test bits per char" in text  # the unit of the runs' data
    assert "A manifest for the static page &lt;&amp;&gt; its tests" in text  # TITLE, escaped
    # curves: one chart of training bits a cell, quick validation only where stored, one line a seed
    assert text.count("training, bits per char") == 3 and text.count("quick validation, bits per char") == 1
    assert text.count("<polyline") == 2 + 2 + 1 + 2
    # self-contained: no script, no external reference
    assert not page.urls and "<script" not in text and not re.search(r"(https?:)?//[a-z0-9]", text.lower())


def test_ticks_span_the_values_with_round_steps():
    assert ticks(2.59, 2.78) == [2.55, 2.6, 2.65, 2.7, 2.75, 2.8]
    assert ticks(9, 299, 4) == [0, 100, 200, 300]
    assert ticks(2.5, 2.5)[0] < 2.5 < ticks(2.5, 2.5)[-1]  # one value: a span around it


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--scale", "paper"], "no run of {path} at scale 'paper' to compare (stored at: tiny); pass --scale"),
        (["--port", "7000"], "--port/--host: not with --static (the static page is a file, not served)"),
    ],
)
def test_a_static_page_it_cannot_write_is_one_line_and_nothing_written(static_store, tmp_path, capsys, args, said):
    path, root = static_store
    out = tmp_path / "page.html"
    assert main(["--results", str(root), "dashboard", "--static", str(path), "--out", str(out), *args]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {said.format(path=path)}"]
    assert not out.exists()


def test_out_and_several_names_need_static(static_store, tmp_path, capsys):
    path, root = static_store
    assert main(["--results", str(root), "dashboard", str(path), "--out", str(tmp_path / "p.html")]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --out: only with --static (the trackio dashboard is served, not written)"
    )
    assert main(["--results", str(root), "dashboard", str(path), str(path)]) == 2
    assert "the trackio dashboard opens on one: name one, or pass --static" in capsys.readouterr().err
