#!/usr/bin/env bash
# The sample of the README: setup from nothing, then build sample_project/ with dbt on the embedded default (local
# Spark, DuckDB-file catalog, local data folder) and show the result read by DuckDB's own ducklake extension.
set -euo pipefail
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
START=$SECONDS
source scripts/setup.sh
# the reference implementation, only to show the result as DuckDB users see it
.venv/bin/python -m pip install -q -c constraints.txt duckdb-extension-ducklake
cd sample_project
export DBT_PROFILES_DIR=. DUCKLAKE_SAMPLE_DIR="${1:-lake}"
rm -rf "$DUCKLAKE_SAMPLE_DIR" target logs
dbt() { ../.venv/bin/dbt "$@"; }
step "dbt debug"; dbt debug
step "dbt seed (the shop's raw tables)"; dbt seed
step "dbt source freshness (from DuckLake snapshots)"; dbt source freshness
step "dbt build (staging views, marts tables, incremental model, data tests)"; dbt build --exclude resource_type:seed
step "dbt run again (the incremental model appends only new rows)"; dbt run --select order_log
step "dbt snapshot (customers_history: every version of raw_customers so far)"; dbt snapshot
step "DuckDB changes raw_customers (update, delete, insert)"; ../.venv/bin/python change_upstream.py "$DUCKLAKE_SAMPLE_DIR"
step "dbt run (customer_directory merges just those changes from the change feed)"
dbt run --select customer_directory
step "dbt snapshot (customers_history keeps each intermediate version, timed by DuckLake commits)"; dbt snapshot
step "dbt docs generate (row counts and sizes from DuckLake stats)"; dbt docs generate
step "the lake, read by DuckDB"
../.venv/bin/python show_lake.py "$DUCKLAKE_SAMPLE_DIR"
step "sample done in $((SECONDS - START))s: sample_project/$DUCKLAKE_SAMPLE_DIR"
