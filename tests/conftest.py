"""OMP_WAIT_POLICY=PASSIVE before any test module imports torch, as the `repro` command sets it before torch
loads (repro.session.exits): spinning OpenMP threads make every small parallel region cost a time slice on a
shared CPU (the sparse kernels' tests ran 50x slower without it). Tests call ``main()`` in this process,
after torch is imported, so the setting has to be made here, first.

Every test runs isolated: its own data and results roots and W&B off (a suite overrides
``isolated_env`` to share one store), never the user's login, so no test reads or writes the user's. The
one thing tests share is the machine's measured GEMM peak (``$REPRO_PEAK_CACHE``): measured once per test
session, not once per results root as it was (a fresh process and about 3 s each, 85 times in a full run),
and never in the user's own cache folder."""

import os
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402


@pytest.fixture
def isolated_env(tmp_path: Path) -> dict[str, str]:
    """The environment of the test's ``repro`` (in-process and in the processes it starts)."""
    return {"REPRO_DATA": str(tmp_path / "data"), "REPRO_RESULTS": str(tmp_path / "results"), "WANDB_MODE": "disabled"}


@pytest.fixture(scope="session")
def peak_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "peak-flops.json"


@pytest.fixture(autouse=True)
def isolated(isolated_env: dict[str, str], peak_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPRO_PEAK_CACHE", str(peak_cache))
    for key, value in isolated_env.items():
        monkeypatch.setenv(key, value)
    # WANDB_SERVICE: the W&B service an in-process run of an earlier test started (wandb exports it for
    # child processes); a child killed while sharing it leaves its run id "in use" for the child resuming it
    for key in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_SERVICE"):
        monkeypatch.delenv(key, raising=False)
