#!/usr/bin/env bash
# The test command of the README: setup from nothing, then ruff and the whole test suite.
set -euo pipefail
# every process the suite starts (dbt commands, Spark's Python workers) imports the package and dbt: with byte code
# kept it compiles them once, not at each start (a setting some images make)
unset PYTHONDONTWRITEBYTECODE
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
START=$SECONDS
source scripts/setup.sh --tests

step "ruff check ."
ruff_rc=0
.venv/bin/ruff check . || ruff_rc=$?  # still run the tests, fail at the end

step "mypy (the package's types)"
mypy_rc=0
# its cache kept across clones: a module whose source hash is unchanged (dbt's, pyspark's, most of ours) is not
# checked again, wherever the checkout is (about 60 s from nothing, a few seconds after)
.venv/bin/mypy --cache-dir "${XDG_CACHE_HOME:-$HOME/.cache}/dbt-ducklake/mypy" || mypy_rc=$?

step "pytest"
rc=0
report="$(mktemp -d)/pytest.xml"
.venv/bin/pytest -q -p no:cacheprovider --durations=25 -n 2 --dist loadscope --no-loadscope-reorder \
    --junitxml="$report" tests || rc=$?
if [ "$rc" -eq 5 ]; then
    die "pytest collected no tests"
fi
if [ -s "$report" ] && [ "$rc" -ne 0 ]; then
    step "what failed"
    .venv/bin/python scripts/failed_tests.py "$report"
fi
step "done: ruff exit code $ruff_rc, mypy exit code $mypy_rc, pytest exit code $rc, total $((SECONDS - START))s"
[ "$ruff_rc" -eq 0 ] || die "ruff check failed (see above)"
[ "$mypy_rc" -eq 0 ] || die "mypy found type errors (see above)"
exit "$rc"
