"""Rows a statement computes once and reads in several passes (a MERGE source), and what to do when they are lost.

A local checkpoint keeps its blocks on the executors that computed them. On a cluster an executor can go (a killed
or preempted machine, a heartbeat the driver gave up on) and take its blocks along: the next pass fails with
CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND, by design, since recomputing a non-deterministic source would give rows the
earlier passes never saw. Nothing is in the catalog transaction until every pass is done, so the statement can run
again from the start; Delta Lake's MERGE does the same (with a replicated copy on the retry), and so do we.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from pyspark.sql import DataFrame

_log = logging.getLogger(__name__)

LOST_BLOCK = "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND"
ATTEMPTS = 3  # the first run and two more: each retry keeps two copies of every block


def lost_kept_rows(error: BaseException) -> bool:
    """Whether a statement failed because kept rows were lost with an executor (classic and Connect errors both name
    the condition in their text; the Python exception classes differ between them)."""
    return LOST_BLOCK in str(error)


@contextlib.contextmanager
def computed_once(df: DataFrame, *, replicated: bool = False) -> Iterator[DataFrame]:
    """df with its rows computed at its first use and kept until the block ends (a local checkpoint); replicated:
    two copies of each block on different executors, so that losing one executor loses no rows.

    Why not `persist`: Spark's cache is keyed by the plan, so another statement's unpersist of an equal plan (two
    models with the same SQL) or a replaced view that the plan read drops it, and the next pass recomputes the rows.
    A recomputed MERGE source gets other row numbers (monotonically_increasing_id after a shuffle depends on the
    order the rows arrive in), so matched rows would be taken for unmatched ones. A checkpoint's blocks belong to
    this DataFrame alone; a lost executor makes the statement fail (see lost_kept_rows), never recompute."""
    from pyspark import StorageLevel

    level = StorageLevel.MEMORY_AND_DISK_2 if replicated else StorageLevel.MEMORY_AND_DISK
    kept = df.localCheckpoint(eager=False, storageLevel=level)
    try:
        yield kept
    finally:
        jdf = getattr(kept, "_jdf", None)  # classic: free the blocks now (Connect frees them with the DataFrame)
        if jdf is not None:
            with contextlib.suppress(Exception):
                jdf.queryExecution().logical().rdd().unpersist(False)


def note_retry(what: str, attempt: int) -> None:
    _log.warning(f"{what}: rows kept on an executor were lost with it ({LOST_BLOCK}); running it again "
                 f"(attempt {attempt + 1} of {ATTEMPTS}, two copies of each block)")
