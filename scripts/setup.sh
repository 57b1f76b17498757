#!/usr/bin/env bash
# Setup from nothing, idempotent: Java 17 (installed if missing), PostgreSQL server binaries (tests only), .venv.
# Usage: bash scripts/setup.sh [--tests]   (sourced by scripts/test.sh and scripts/sample.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WITH_TESTS=0
[ "${1:-}" = "--tests" ] && WITH_TESTS=1
EXTRAS=".[test]"
[ "$WITH_TESTS" -eq 1 ] || EXTRAS="."

START=${START:-$SECONDS}
step() { printf '\n==> %s  (+%ds)\n' "$*" "$((SECONDS - START))"; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo -n "$@"; else return 1; fi; }

step "Java (Spark 4 runs on Java 17)"
if ! command -v java >/dev/null 2>&1; then
    echo "no java on PATH: installing openjdk-17-jre-headless (Debian/Ubuntu)"
    { as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        openjdk-17-jre-headless >/dev/null; } || die "Java 17 is needed for Spark: install openjdk-17-jre-headless"
fi
java_version=$(java -version 2>&1)
printf '%s\n' "$java_version"
if ! printf '%s\n' "$java_version" | head -n1 | grep -Eq 'version "(17|21)(\.|")'; then
    echo "WARNING: Spark 4 is tested here with Java 17; found the version above."
fi

if [ "$WITH_TESTS" -eq 1 ]; then
step "PostgreSQL server binaries"
have_pg_server() {
    local d
    for d in "${DUCKLAKE_TEST_PG_BINDIR:-}" "$(pg_config --bindir 2>/dev/null || true)" /usr/lib/postgresql/*/bin; do
        if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
            echo "found in $d"
            return 0
        fi
    done
    return 1
}
if [ -n "${DUCKLAKE_TEST_PG_URL:-}" ]; then
    echo "DUCKLAKE_TEST_PG_URL is set: the tests use that server"
elif ! have_pg_server; then
    command -v apt-get >/dev/null || die "PostgreSQL server binaries are missing and there is no apt-get: install PostgreSQL (initdb, pg_ctl, postgres) or set DUCKLAKE_TEST_PG_URL"
    echo "missing: installing Debian's postgresql package"
    as_root apt-get update -qq || die "apt-get update failed (or no root/sudo): install Debian's postgresql package"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
        || die "apt-get install postgresql failed"
    have_pg_server || die "postgresql installed but initdb/pg_ctl/postgres still not found"
fi

fi

step "Python virtualenv (.venv)"
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || die "$PYTHON not found: install Python >= 3.10"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$("$PYTHON" --version 2>&1) is too old: Python >= 3.10 is required (set PYTHON=/path/to/python3.x)"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv || die "could not create .venv (Debian: apt-get install python3-venv)"
fi
.venv/bin/python --version
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off
# a regular (not editable) install: dbt finds plugins by scanning dbt/adapters/ in site-packages, which an editable
# install leaves empty (`dbt --version` and `dbt init` would not list ducklake); and CI tests the package as users get
# it. For a quick edit loop, `.venv/bin/pip install -e .` (re-run this script to be back to the regular install).
# uv installs the set: it resolves, downloads and unpacks in parallel (about 55 s against pip's 140 s for the test
# set here); pip, if uv cannot be had
if .venv/bin/python -m pip install -q "uv>=0.5,<1" 2>/dev/null; then
    .venv/bin/uv pip install -q --python .venv/bin/python -c constraints.txt "$EXTRAS"
else
    .venv/bin/python -m pip install -q -c constraints.txt "$EXTRAS"
fi

if [ "$WITH_TESTS" -eq 1 ]; then
    # duckdb 2.x beside the venv's 1.5 (the reference's version): the tests run the catalog layer with it on
    # PYTHONPATH in a child process (tests/lake/test_duckdb2_catalog_files.py)
    .venv/bin/python -m pip install -q --no-warn-conflicts --upgrade --target .venv/duckdb2 -c constraints-duckdb2.txt duckdb \
        || die "could not install duckdb 2.x into .venv/duckdb2"
fi


step "Spark's S3 connector (hadoop-aws + AWS SDK bundle, for data paths on s3://; cached, offline once there)"
# versions and cache directory come from the package itself (spark/env/s3a.py), so the adapter finds what this installs
mapfile -t S3A < <(.venv/bin/python -m dbt.adapters.ducklake.spark.env.s3a coordinates)
JARS_DIR=${S3A[0]}
missing=()
for coord in "${S3A[@]:1}"; do
    IFS=: read -r _group artifact version <<<"$coord"
    [ -f "$JARS_DIR/$artifact-$version.jar" ] || missing+=("$coord")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "cached in $JARS_DIR"
else
    if ! command -v mvn >/dev/null 2>&1; then
        echo "no mvn on PATH: installing Debian's maven package"
        { as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven \
            >/dev/null; } || echo "WARNING: could not install maven"
    fi
    mkdir -p "$JARS_DIR"
    for coord in "${missing[@]}"; do
        echo "fetching $coord from Maven Central"
        if ! mvn -q -B dependency:copy -Dartifact="$coord" -DoutputDirectory="$JARS_DIR" >"$JARS_DIR/mvn.log" 2>&1; then
            msg="could not fetch $coord (see $JARS_DIR/mvn.log): data paths on s3:// need it, or spark.jars.packages"
            [ "$WITH_TESTS" -eq 1 ] && die "$msg"
            echo "WARNING: $msg"
        fi
    done
fi

step "Spark driver class archive (faster JVM start for every dbt run; ~1 min once per JDK and Spark install)"
# see dbt/adapters/ducklake/spark/env/class_archive.py; a failure here only means drivers start the slower way
if .venv/bin/python -m dbt.adapters.ducklake.spark.env.class_archive build >.venv/class-archive.log 2>&1; then
    grep '^class archive' .venv/class-archive.log || true
else
    echo "class archive not built (see .venv/class-archive.log): Spark drivers start without it"
fi
