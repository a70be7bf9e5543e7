#!/usr/bin/env bash
# The whole check, from a fresh machine: set-up, lint, the import contract, types, the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests run OSWorld's real tasks, one per domain this machine runs offline (GIMP, Impress
# and VLC among them): OSWorld's apps are installed unless AGENT_S3_OSWORLD_APPS=0 says not to.
AGENT_S3_OSWORLD_APPS="${AGENT_S3_OSWORLD_APPS:-1}" bash scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check .
echo "== import contract"
.venv/bin/lint-imports
echo "== types"
.venv/bin/mypy
echo "== tests"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "$@"
