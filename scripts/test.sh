#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the linters and the whole test suite. Extra arguments go
# to pytest, e.g. `bash scripts/test.sh -m "not compile"` for the fast loop.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
"$PYTHON" -m mypy
"$PYTHON" -m pytest --durations=15 "$@"
