#!/usr/bin/env bash
# Install repro into ./.venv from scratch: the CPU build of torch first (pinned, so pip never pulls a
# multi-GB CUDA build), then the package with its test and dashboard extras. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check torch==2.13.0
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev,dashboard,cluster]'
