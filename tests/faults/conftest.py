"""Fixtures of the fault-injection matrix (every test here is marked ``faults``)."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from repro.store.runs import RunDir

sys.path.insert(0, str(Path(__file__).parent))
import faultkit  # noqa: E402
from textcorpus import write_corpus  # noqa: E402


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.faults)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus.txt")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models train far faster on one thread (and a loaded 2-core machine punishes two)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def straight(tmp_path_factory):
    """``straight(model)``: the summary and metrics of an uninterrupted run of ``faultkit.manifest``
    (computed once per session; a run's numbers do not depend on where its corpus lies);
    ``straight.base``: the folder of its store."""
    from repro.config import manifest as manifests
    from repro.train import runner

    base, done = tmp_path_factory.mktemp("straight"), {}

    def get(model: str = "dense") -> tuple[dict, pd.DataFrame]:
        if model not in done:
            path = base / f"{model}.yaml"
            path.write_text(faultkit.manifest(write_corpus(base / "corpus.txt"), model=model))
            m = manifests.load(path)
            (spec,) = m.expand("tiny")
            summary = runner.run_spec(spec, m, base / "results", echo=lambda s: None).summary
            done[model] = summary, RunDir(base / "results", m.name, spec.run_id).metrics()
        return done[model]

    get.base = base  # its store: base/results (manifest base/<model>.yaml), for tests that start from one
    return get


@pytest.fixture
def write_manifest(tmp_path: Path, corpus: Path):
    def write(text: str | None = None, file: str = "m.yaml", **kwargs) -> Path:
        path = tmp_path / file
        path.write_text(text if text is not None else faultkit.manifest(corpus, **kwargs))
        return path

    return write


@pytest.fixture(scope="session")
def forkserver():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["repro.cli.command", "repro.train.runner", "faultkit"])
    return ctx


@pytest.fixture
def kid(forkserver, tmp_path: Path):
    """``kid(argv, **faults)`` runs ``repro ARGV`` in a child process; returns (exit code, stdout, stderr).
    A child killed by signal N returns -N. ``start=True`` returns the running process instead."""
    count = iter(range(1000))

    def run(argv: list[str], start: bool = False, **faults):
        out = str(tmp_path / f"kid{next(count)}")
        proc = forkserver.Process(target=faultkit.child, args=(argv, dict(os.environ), out), kwargs=faults)
        proc.start()
        if start:
            proc.out = out
            return proc
        proc.join(300)
        return proc.exitcode, Path(out + ".out").read_text(), Path(out + ".err").read_text()

    return run
