#!/usr/bin/env bash
# The version smoke matrix: for each constraints-<variant>.txt (a pyspark minor and/or a dbt-core minor other than
# the default set's; each other minor is in one variant), a virtualenv built once from that exact set into a cache
# directory, then a smoke set of tests in it: the adapter's basic suite, an incremental merge, (a dbt variant) a snapshot, a
# first read through the layer's Python data source, a dbt build through Spark Connect and (a Spark variant) the Spark
# layer on a standalone cluster.
# The whole suite runs on the default set (constraints.txt, scripts/test.sh); this checks the other versions in
# minutes instead of running it again per variant. CI (.ci/run) runs it after the suite.
#
# Usage: bash scripts/matrix.sh [--prepare] [variant...]   (default: every constraints-*.txt; e.g. `... spark42`)
#   --prepare: only install each environment's dependencies (not the project, so the checkout's tree is not touched);
#   CI runs it in the background of the suite (mostly downloads and unpacking), and the matrix then only adds the
#   project to each environment.
# Env: MATRIX_CACHE (where the environments live, default ~/.cache/dbt-ducklake-matrix), PYTHON (default python3).
set -euo pipefail
# every process the suite starts (dbt commands, Spark's Python workers) imports the package and dbt: with byte code
# kept it compiles them once, not at each start (a setting some images make)
unset PYTHONDONTWRITEBYTECODE
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
CACHE=${MATRIX_CACHE:-$HOME/.cache/dbt-ducklake-matrix}
PYTHON=${PYTHON:-python3}
mkdir -p "$CACHE"

# One test of each kind (-x: the first failure is the variant's answer; the full suite runs on the default set).
# From the adapter's basic suite, the classes that cross what a dbt-core minor changes (materializations, the
# incremental and test runners, the relation cache): its other classes run on the default set only. From the
# unique-key suite, a merge on three keys and a refused key (its other cases vary the key list, not the versions).
SMOKE=(
    tests/functional/adapter/test_basic.py::TestSimpleMaterializations
    tests/functional/adapter/test_basic.py::TestIncremental
    tests/functional/adapter/test_basic.py::TestGenericTests
    tests/functional/adapter/test_basic.py::TestAdapterMethods
    tests/functional/adapter/test_incremental.py::TestIncrementalUniqueKeyMerge::test__trinary_unique_key_list
    tests/functional/adapter/test_incremental.py::TestIncrementalUniqueKeyMerge::test__bad_unique_key
    tests/spark/test_first_read.py::test_first_read_then_manifest_equal_duckdb
    tests/spark/test_first_read.py::test_time_travel_first_read_equals_duckdb
    tests/spark/test_first_read.py::test_spark_lookup_of_python_data_sources_is_settled_here
    tests/functional/test_connect_dbt.py
    tests/unit/test_compat.py
)
# a variant of dbt-core also runs a snapshot (dbt's snapshot materialization and its MERGE macros); a variant of Spark
# runs the Spark layer on a standalone cluster (a dbt variant of the default Spark would not; the lost-executor case
# on that module's cluster is the default set's)
DBT_SMOKE=(tests/functional/adapter/test_snapshots.py::TestSnapshotCheckCols)
SPARK_SMOKE=(tests/spark/test_cluster.py::test_write_delete_and_read_on_a_standalone_cluster)
# the first read of a many-file table goes through Spark's Python data source API, which changes between Spark minors
# (the manifests' chunking and the many-file shapes are the layer's own: the whole suite has them)

PREPARE=0
if [ "${1:-}" = "--prepare" ]; then
    PREPARE=1
    shift
    # the dependency list is read from pyproject.toml with tomllib (Python 3.11+); without it the matrix builds as usual
    "$PYTHON" -c 'import tomllib' 2>/dev/null || { echo "matrix --prepare needs Python 3.11+: skipped"; exit 0; }
fi
if [ "$#" -gt 0 ]; then
    variants=("$@")
else
    variants=()
    for f in constraints-*.txt; do
        [ -e "$f" ] || continue
        v=${f#constraints-}
        v=${v%.txt}
        # duckdb2 is no whole environment: setup.sh installs it beside the default one for the catalog-file tests
        [ "$v" = duckdb2 ] && continue
        variants+=("$v")
    done
fi
[ "${#variants[@]}" -gt 0 ] || { echo "no constraints-*.txt files" >&2; exit 1; }

# the environments are cached across clones: the code under test is this checkout's, first on the path (an
# environment's editable install names the checkout that built it), and checked per variant below
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

summary=()
overall=0
for v in "${variants[@]}"; do
    cons="$REPO/constraints-$v.txt"
    [ -f "$cons" ] || { echo "no $cons" >&2; exit 1; }
    env_dir="$CACHE/$v"
    # rebuilt only when its constraints file (or the project's dependencies) changed
    key=$(cat "$cons" pyproject.toml | sha256sum | cut -c1-16)
    start=$SECONDS
    if [ "$PREPARE" -eq 1 ]; then
        if [ "$(cat "$env_dir/.key" 2>/dev/null)" != "$key" ] && [ "$(cat "$env_dir/.deps" 2>/dev/null)" != "$key" ]; then
            printf '\n==> %s: preparing %s\n' "$v" "$env_dir"
            rm -rf "$env_dir"
            "$PYTHON" -m venv "$env_dir"
            mapfile -t deps < <("$PYTHON" -c 'import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"] + p["optional-dependencies"]["test"]))')
            "$env_dir/bin/pip" install -q --no-compile -c "$cons" "${deps[@]}"
            echo "$key" >"$env_dir/.deps"
        fi
        continue
    fi
    if [ "$(cat "$env_dir/.key" 2>/dev/null)" != "$key" ]; then
        if [ "$(cat "$env_dir/.deps" 2>/dev/null)" = "$key" ]; then  # prepared: its dependencies are in
            printf '\n==> %s: adding the project to %s\n' "$v" "$env_dir"
            "$env_dir/bin/pip" install -q --no-compile --no-deps -c "$cons" -e "$REPO"
        else
            printf '\n==> %s: building %s\n' "$v" "$env_dir"
            rm -rf "$env_dir"
            "$PYTHON" -m venv "$env_dir"
            "$env_dir/bin/pip" install -q --no-compile -c "$cons" -e "$REPO[test]"  # modules compile on first import
        fi
        echo "$key" >"$env_dir/.key"
    fi
    built=$((SECONDS - start))
    printf '\n==> %s: %s\n' "$v" "$("$env_dir/bin/python" -c 'from importlib.metadata import version as v
print(", ".join(f"{d} {v(d)}" for d in ("pyspark", "dbt-core", "dbt-spark", "dbt-tests-adapter", "duckdb")))')"
    adapter=$("$env_dir/bin/python" -c 'import dbt.adapters.ducklake as m; print(m.__file__)')
    case "$adapter" in "$REPO"/*) ;; *) echo "the $v environment imports the adapter from $adapter, not $REPO" >&2; exit 1 ;; esac
    rc=0
    # nice: the smoke set shares the machine with whatever else runs there
    tests=("${SMOKE[@]}")
    case "$v" in spark*) tests+=("${SPARK_SMOKE[@]}") ;; esac
    case "$v" in *dbt*) tests+=("${DBT_SMOKE[@]}") ;; esac
    # pyspark 4.1, one minor after the default 4.0: its client also builds through a Connect server of 4.0 (the
    # default environment's interpreter serves)
    unset DUCKLAKE_CONNECT_SERVER_PYTHON
    case "$v" in spark41*) [ -x "$REPO/.venv/bin/python" ] && export DUCKLAKE_CONNECT_SERVER_PYTHON="$REPO/.venv/bin/python" ;; esac
    # two workers, a module's tests on one (they share its dbt project or Spark cluster)
    nice -n 10 "$env_dir/bin/python" -m pytest -q -p no:cacheprovider -x -n 2 --dist loadscope --durations=8 "${tests[@]}" || rc=$?
    summary+=("$v: exit $rc, build ${built}s, tests $((SECONDS - start - built))s")
    [ "$rc" -eq 0 ] || overall=1
done
[ "$PREPARE" -eq 0 ] || exit 0
printf '\n==> matrix\n'
printf '%s\n' "${summary[@]}"
exit "$overall"
