"""Counting the Spark jobs a block runs, without leaving the thread in a job group (later tests count the jobs of no
group: `statusTracker().getJobIdsForGroup(None)`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@contextmanager
def job_group(spark: SparkSession, group: str) -> Iterator[Callable[[], list[int]]]:
    """The block's jobs run in `group` (this thread only); yields a function giving their ids. The thread's group
    is cleared at the end (set to none, not to an empty name)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        yield lambda: list(sc.statusTracker().getJobIdsForGroup(group))
    finally:
        for key in _GROUP_PROPERTIES:
            sc.setLocalProperty(key, None)  # type: ignore[arg-type]
