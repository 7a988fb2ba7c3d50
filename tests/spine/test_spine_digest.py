"""The computation digest (issue 59): what a run executes, hashed so that a move, a rename, a docstring or
formatting leave it as it is and a changed body of an executed function does not. Each test edits the
package's own sources in memory (a Program is built from a path -> text mapping), or a real git history."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from repro.store import digest as code
from repro.store.digests import Digests

REPO = code.repository()
FILES = code.working_tree(REPO)
GATHER = "repro/models/relative_attention.py"  # the dynamic span's gather: bucketed_attention


def _kinds() -> dict[str, dict]:
    """One stored spec per kind of computation: (family, attention, span kind, dataset)."""
    out = {}
    for path in sorted((REPO / "results" / "runs").glob("*/*/spec.yaml")):
        spec = yaml.safe_load(path.read_text())
        model = spec.get("model") or {}
        kind = (model.get("family"), model.get("attention"), (model.get("span") or {}).get("kind"))
        out.setdefault("/".join(str(k) for k in kind) + f"@{spec['data']['name']}", spec)
    return out


KINDS = _kinds()


def _digests(files: dict[str, str]) -> dict[str, str]:
    program = code.Program(files)
    return {kind: code.of(program, spec) for kind, spec in KINDS.items()}


BEFORE = _digests(FILES)


def test_the_store_holds_every_kind_the_tests_below_need():
    families = {k.split("/")[0] for k in KINDS}
    assert {"adaptive_span", "sparse_transformer", "frontier"} <= families
    assert {"dense", "strided", "fixed", "window", "dynamic"} <= {k.split("/")[1] for k in KINDS}
    assert len(set(BEFORE.values())) > len(families)  # digests tell computations apart


def test_moving_and_renaming_a_models_module_keeps_every_digest():
    moved = "repro/models/kernels/band_rows.py"
    files = {}
    for path, text in FILES.items():
        text = text.replace("from repro.models import relative_attention", "from repro.models.kernels import band_rows")
        text = text.replace("repro.models.relative_attention", "repro.models.kernels.band_rows")
        files[moved if path == GATHER else path] = text
    assert moved in files and GATHER not in files
    assert _digests(files) == BEFORE


def test_docstrings_comments_formatting_and_an_alias_keep_every_digest():
    def reworded(text: str) -> str:
        text = re.sub(r'(\n    """)([A-Z])', r"\1Reworded. \2", text)  # every function's docstring
        text = text.replace("\n\n\ndef ", "\n\n\n# a comment\n\ndef ")
        return text.replace("    return ", "    return  ")  # formatting inside statements

    files = {path: reworded(text) for path, text in FILES.items()}
    text = files["repro/models/adaptive_span.py"]  # an import alias renamed where it is used
    assert "bucketed_attention(" in text
    text = text.replace(
        "import BandSoftmax, band_attention, bucketed_attention,", "import BandSoftmax, band_attention,"
    )
    files["repro/models/adaptive_span.py"] = (
        "from repro.models.relative_attention import bucketed_attention as gather_rows\n"
        + text.replace("bucketed_attention(", "gather_rows(")
    )
    assert files != FILES
    assert _digests(files) == BEFORE


def test_one_token_in_the_dynamic_span_gather_changes_the_dynamic_span_runs_and_no_other_family():
    text = FILES[GATHER]
    start = text.index("def bucketed_attention(")
    body = text[start:]
    token = "N, tile, w + T - 1"
    assert token in body
    files = {**FILES, GATHER: text[:start] + body.replace(token, "N, tile, w + T - 2", 1)}
    after = _digests(files)
    changed = {k for k in KINDS if after[k] != BEFORE[k]}
    assert any(k.startswith("adaptive_span/None/dynamic") for k in changed)
    # only the adaptive-span family's attention calls it (for every span kind: one class holds the call):
    # the Sparse Transformer does not, nor does any of the frontier's attentions (its dynamic span attends
    # over the whole band)
    assert {k.split("/")[0] for k in changed} == {"adaptive_span"}


def test_a_changed_default_of_one_dataset_row_changes_only_that_datasets_runs():
    path = "repro/data/catalog.py"
    text = FILES[path]
    row = text.index('dict(name="linux-doc"')
    end = text.index("\n    dict(name=", row + 1)
    files = {**FILES, path: text[:row] + text[row:end].replace("21.4M bytes", "21.5M bytes") + text[end:]}
    after = _digests(files)
    for kind in KINDS:
        assert (after[kind] != BEFORE[kind]) == kind.endswith("@linux-doc"), kind


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_stored_runs_get_their_digest_from_their_commit_and_a_move_between_commits_keeps_it(tmp_path):
    repo = tmp_path / "repo"
    for path, text in FILES.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    first = _git(repo, "rev-parse", "--short", "HEAD")
    _git(repo, "mv", GATHER, "repro/models/gather.py")
    for path in repo.joinpath("repro").rglob("*.py"):
        text = path.read_text().replace(
            "from repro.models import relative_attention", "from repro.models import gather"
        )
        path.write_text(text.replace("repro.models.relative_attention", "repro.models.gather"))
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
    second = _git(repo, "rev-parse", "--short", "HEAD")
    digests = Digests(tmp_path / "results", repo)
    for spec in KINDS.values():
        one = digests.own({**spec, "code_version": first})
        assert one.digest == digests.at(spec, second).digest == BEFORE[next(k for k, s in KINDS.items() if s is spec)]
    assert digests.own({**spec, "code_version": f"{first}+dirty"}).digest is None
    missing = digests.at(spec, "0" * 12)
    assert missing.digest is None and "not in the git history" in missing.why
    digests.save()
    assert Digests(tmp_path / "results", repo).cache  # cached for the next report


@pytest.mark.parametrize(
    "summary, kept",
    [
        ({"digest": "abc123def456", "digest_format": code.FORMAT}, True),
        ({"digest": "abc123def456"}, False),  # stamped by the first format: what it hashed has changed since
        ({}, False),
    ],
)
def test_a_digest_recorded_in_the_summary_is_the_runs_own_when_todays_format_made_it(tmp_path, summary, kept):
    spec = {**next(iter(KINDS.values())), "code_version": "0" * 7}
    known = Digests(tmp_path, REPO).own(spec, summary)
    assert known.digest == ("abc123def456" if kept else None)
    if not kept:  # computed from its commit instead, which this history lacks
        assert "not in the git history" in known.why


@pytest.mark.parametrize(
    "path, keeps",
    [
        ("repro/store/settle.py", True),
        ("repro/store/usable.py", True),
        ("repro/data/fetch.py", True),
        ("repro/store/checkpoints.py", False),  # what a resumed run restores: the same edit counts there
    ],
)
def test_code_that_decides_whether_a_run_trains_or_what_it_downloads_keeps_every_digest(path, keeps):
    """Settling (start, resume, skip, adopt a twin), the usable-numbers check and the pinned download decide
    whether a run trains and which bytes it reads, both fixed by its spec and the pins: not what it computes."""
    text = FILES[path]
    body = re.search(r"\ndef \w+\([^)]*\)[^:]*:\n(    \"\"\"(?:.|\n)*?\"\"\"\n)?", text)
    assert body, path
    files = {**FILES, path: text[: body.end()] + "    _ = 1\n" + text[body.end() :]}
    assert (_digests(files) == BEFORE) == keeps
