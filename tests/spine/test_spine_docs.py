"""Docs that cannot drift: docs/commands.md is what the parser generates, and every repository path
README.md and docs/ name exists."""

from __future__ import annotations

import re
from pathlib import Path

from repro.cli import reference
from repro.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("repro", "analysis", "experiments", "results", "tests", "scripts", "docs", ".ci")
# a path as prose writes it: a top-level folder, then names; or a markdown link's target
NOT_AFTER = r"(?<![\w./<$-])"  # inside another path, a placeholder or a variable: not a repository path
PATH = re.compile(NOT_AFTER + "(?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./-]*")
# a module named from the package's folders (`models/span.py`, `train/runner.py`)
PACKAGE = ("config", "data", "models", "train", "store", "files", "report", "track", "cli", "bench")
MODULE = re.compile(NOT_AFTER + "(?:" + "|".join(PACKAGE) + r")/[\w./-]*\.py")
LINK = re.compile(r"\]\(([^)#\s]+)")
# folders commands create under a results root (submitted jobs, W&B's offline runs, the dashboard's
# projects): named by the docs, never committed
MADE_BY_COMMANDS = ("results/jobs/", "results/wandb/", "results/trackio/")


def test_the_command_reference_is_what_the_parser_generates():
    assert (ROOT / "docs" / "commands.md").read_text() == reference.render(build_parser()), (
        "docs/commands.md differs from the parser: regenerate it with `python -m repro.cli.reference`"
    )


def test_the_generated_reference_lists_every_option_of_every_command():
    text = reference.render(build_parser())
    for option in ("--seeds", "--allow-read", "--partition", "--slurm-arg", "--keep", "--retrain-checkpoint"):
        assert f"`{option}" in text, option
    assert "## `repro verify`" in text and "### `repro data prepare`" in text


def named_paths(doc: Path) -> list[tuple[str, Path]]:
    """The repository paths ``doc`` names: written from the repository's root, modules from the package's,
    or linked from the doc's folder."""
    text = doc.read_text()
    out = []
    for match in PATH.finditer(text):
        written = match.group(0).rstrip(".,:;")
        if not _placeholder(text, match.end()) and not written.startswith(MADE_BY_COMMANDS):
            out.append((written, ROOT / written))
    out += [(m.group(0), ROOT / "repro" / m.group(0)) for m in MODULE.finditer(text)]
    for target in LINK.findall(text):
        if "://" not in target and not target.startswith("mailto:"):
            out.append((target, (doc.parent / target).resolve()))
    return out


def _placeholder(text: str, end: int) -> bool:
    """A pattern rather than a path: the name goes on with a placeholder or a glob (`runs/<manifest>/`,
    `experiments/**/*.yaml`, `bench/<bench>.json`)."""
    return end < len(text) and text[end] in "<*{"


def test_every_path_the_docs_name_exists():
    missing = [
        f"{doc.relative_to(ROOT)}: {written}" for doc in DOCS for written, path in named_paths(doc) if not path.exists()
    ]
    assert not missing, "\n".join(missing)


def test_every_path_the_manifests_name_exists():
    """A manifest's notes, descriptions and comments name code and results the way the docs do; a move
    that leaves one pointing nowhere (`repro/optim.py`, now under train/) fails here."""
    shipped = sorted(p for p in (ROOT / "experiments").rglob("*.yaml") if "local" not in p.relative_to(ROOT).parts)
    missing = [
        f"{yaml.relative_to(ROOT)}: {written}"
        for yaml in shipped
        for written, path in named_paths(yaml)
        if not path.exists()
    ]
    assert not missing, "\n".join(missing)


def test_the_readme_is_short_and_opens_on_the_quick_start():
    """Issue 62.1: 14 KB with the Quick start at line 49; the detail lives in docs/."""
    readme = ROOT / "README.md"
    assert readme.stat().st_size <= 12 * 1024
    assert "## Quick start" in readme.read_text().splitlines()[:40]


def test_the_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    tests = (ROOT / "README.md").read_text().split("## Tests\n", 1)[1]
    assert f"```\n{ci}\n```" in tests


def test_the_readme_counts_as_table1s_runs_as_its_manifest_does():
    """The README said 9 runs (3 cells x 3 seeds) after fixed-32 made the cells 4: the counts it gives are
    held to the manifest's, at each scale it names."""
    from repro.config import manifest as manifests

    text = " ".join((ROOT / "README.md").read_text().split())
    found = re.search(
        r"trains its (\d+) runs \((\d+) cells x (\d+) seeds at the default `tiny` scale, as at `cpu`; `small` and "
        r"`paper` have (\d+), one seed each",
        text,
    )
    assert found, "the README's sentence on as-table1's runs changed: update this test"
    runs, cells, seeds, one_seed = map(int, found.groups())
    m = manifests.load(manifests.discover(manifests.SHIPPED)["as-table1"])
    for scale in ("tiny", "cpu"):
        assert (len(m.expand(scale)), len(m.expand(scale, seeds=1)), m.replicates(scale)) == (runs, cells, seeds)
    for scale in ("small", "paper"):
        assert (len(m.expand(scale)), m.replicates(scale)) == (one_seed, 1)
