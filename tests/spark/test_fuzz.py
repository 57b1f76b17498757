"""A seeded short run of the differential fuzzer (tests/support/fuzz.py; the long run is bench/fuzz.py): our layers
and DuckDB apply the same random operations, every snapshot is compared both ways, and no mismatch is allowed."""

from __future__ import annotations

from pyspark.sql import SparkSession

from tests.support.coverage import FULL, full_only
from tests.support.fuzz import OPERATIONS, run_sequences

# one seeded sequence of 6 steps in the default run, three of 12 with DUCKLAKE_TEST_FULL=1; bench/fuzz.py runs the
# long ones. Every step re-reads every snapshot, so a sequence's cost grows with the square of its length; seed 50's
# first six steps are create, insert, delete, flush, merge, update: every DML kind and a maintenance step (a concurrent
# step is the full suite's, as in test_concurrent_steps_agree_with_duckdb)
SEEDS = [11, 12, 13] if FULL else [50]
LENGTH = 12 if FULL else 6


def test_seeded_sequences_agree_with_duckdb(spark: SparkSession) -> None:
    sequences, operations, mismatches = run_sequences(spark, SEEDS, LENGTH)
    assert mismatches == [], "\n\n".join(mismatches)
    assert sequences == len(SEEDS) and operations >= len(SEEDS) * LENGTH // 2


@full_only("concurrent steps: the busy-lake and writers tests run real concurrent writers by default")
def test_concurrent_steps_agree_with_duckdb(spark: SparkSession) -> None:
    """Mostly concurrent steps (one change per table at once, on threads sharing the session, DuckDB beside them on
    the mixed lake): the lakes still agree with DuckDB at every snapshot and with each other."""
    weights = {k: 0 for k in OPERATIONS} | {"create": 1, "insert": 2, "concurrent": 6}
    sequences, operations, mismatches = run_sequences(spark, [21], 8, backends=("sqlite",), weights=weights)
    assert mismatches == [], "\n\n".join(mismatches)
    assert sequences == 1 and operations >= 6
