"""Import repro before any test module imports torch: repro sets OMP_WAIT_POLICY=PASSIVE, which must
precede torch's first import (spinning OpenMP threads make every small parallel region cost a time slice
on a shared CPU: the sparse kernels' tests ran 50x slower without it).

Every test runs isolated: its own data and results roots and W&B off (a suite overrides
``isolated_env`` to share one store), never the user's login, so no test reads or writes the user's."""

from pathlib import Path

import pytest

import repro  # noqa: F401


@pytest.fixture
def isolated_env(tmp_path: Path) -> dict[str, str]:
    """The environment of the test's ``repro`` (in-process and in the processes it starts)."""
    return {"REPRO_DATA": str(tmp_path / "data"), "REPRO_RESULTS": str(tmp_path / "results"), "WANDB_MODE": "disabled"}


@pytest.fixture(autouse=True)
def isolated(isolated_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in isolated_env.items():
        monkeypatch.setenv(key, value)
    for key in ("WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
