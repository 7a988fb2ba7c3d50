"""Debian packages that carry the offline stand-in corpora: find their files, install them if allowed."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from repro.data.errors import DataError


def install_command(package: str) -> str:
    return f"sudo apt-get install {package}"


def ensure_installed(package: str, path: Path) -> Path:
    """``path`` if it exists; else install ``package`` with apt-get when running as root, else explain how."""
    if path.exists():
        return path
    if os.name == "posix" and os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"installing Debian package {package} ...", file=sys.stderr)
        done = subprocess.run(["apt-get", "install", "-y", "-q", package], capture_output=True, text=True)
        if done.returncode == 0 and path.exists():
            return path
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise DataError(f"`apt-get install -y {package}` failed ({tail}); try `apt-get update` first, "
                        f"or pass --from DIR")
    raise DataError(f"{path} not found: install it with `{install_command(package)}` (Debian/Ubuntu), "
                    f"or pass --from DIR holding the same files")
