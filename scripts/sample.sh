#!/usr/bin/env bash
# The sample of the README: setup from nothing, then build a small lake on the embedded default (DuckDB-file catalog,
# local data folder) and show it read by DuckDB's own ducklake extension.
set -euo pipefail
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
START=$SECONDS
source scripts/setup.sh
# the reference implementation, only to show the result as DuckDB users see it
.venv/bin/python -m pip install -q -c constraints.txt duckdb-extension-ducklake
step "sample: examples/format_layer_demo.py"
.venv/bin/python examples/format_layer_demo.py "${1:-sample_lake}"
