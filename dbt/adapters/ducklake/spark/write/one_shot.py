"""One statement, one snapshot: shorthands over `LakeWork` for callers outside a SQL session (scripts, tests,
benchmarks).

Each is a unit of work holding one statement, committed on leaving its block: the same staging, file ownership and
commit as a dbt statement takes, so what they show is what the adapter does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession

from ...lake.lake import DuckLake
from ...lake.records import Snapshot
from .dml import When, clauses_of
from .work import LakeWork


def append(spark: SparkSession, lake: DuckLake, schema: str, table: str, df: DataFrame, *, author: str | None = None,
           commit_message: str | None = None, commit_extra_info: str | None = None) -> Snapshot | None:
    """INSERT INTO schema.table the DataFrame's rows as one snapshot; None when there were no rows to add.

    Raises:
        NoSuchTableError: the table does not exist (or was dropped before the commit).
        CommitConflictError: another writer committed a conflicting change (the written files are removed).
        InvalidDataFileError / UnsupportedTypeError: the DataFrame does not fit the table.
    """
    with _unit(spark, lake, author, commit_message, commit_extra_info) as work:
        work.insert(schema, table, df)
    return work.committed


def create_table_as(spark: SparkSession, lake: DuckLake, schema: str, table: str, df: DataFrame, *,
                    partition_by: Sequence[tuple[str, str]] | None = None, replace: bool = False,
                    comment: str | None = None, types: Mapping[str, str] | None = None, author: str | None = None,
                    commit_message: str | None = None, commit_extra_info: str | None = None) -> Snapshot:
    """CREATE [OR REPLACE] TABLE schema.table AS the DataFrame: table and rows in ONE snapshot.

    partition_by is [(column, transform)], transforms as DuckLake's (identity, year, month, day, hour, bucket(N)).
    types: DuckLake types of columns by path (types.from_spark), e.g. {"id": "uuid"} for a text column of UUIDs.
    Readers see the old table (if replaced) until the commit.

    Raises:
        UnsupportedTypeError: a DataFrame column has a type DuckLake cannot store (named in the message).
        TableExistsError: the table exists and replace is False.
        NoSuchSchemaError: the schema does not exist.
        CommitConflictError: another writer committed a conflicting change (the written files are removed).
    """
    with _unit(spark, lake, author, commit_message, commit_extra_info) as work:
        work.create_table_as(schema, table, df, partition_by=partition_by, replace=replace, comment=comment,
                             types=types)
    assert work.committed is not None  # a CREATE TABLE is never an empty unit
    return work.committed


def delete_where(spark: SparkSession, lake: DuckLake, schema: str, table: str, condition: str | None = None, *,
                 author: str | None = None, commit_message: str | None = None,
                 commit_extra_info: str | None = None) -> Snapshot | None:
    """DELETE FROM schema.table [WHERE condition] as one snapshot; None when no row matched (no snapshot, as DuckDB).

    Raises:
        NoSuchTableError: no such table. AnalysisException: the condition is not valid Spark SQL for the table.
        CommitConflictError: another writer deleted from the same files (or altered/dropped the table) meanwhile.
    """
    with _unit(spark, lake, author, commit_message, commit_extra_info) as work:
        work.delete(schema, table, condition)
    return work.committed


def update_where(spark: SparkSession, lake: DuckLake, schema: str, table: str, assignments: dict[str, str],
                 condition: str | None = None, *, author: str | None = None, commit_message: str | None = None,
                 commit_extra_info: str | None = None) -> Snapshot | None:
    """UPDATE schema.table SET col = expr, … [WHERE condition] as one snapshot, merge-on-read.

    Matching rows are deleted by position and their new versions written by Spark's executors with their row ids
    kept, so the change feed shows update pre- and post-images, as DuckDB does. None when no row matched.

    Raises:
        NoSuchColumnError: an assignment names no column. AnalysisException: an expression is not valid Spark SQL.
        CommitConflictError: another writer changed the same files (or the table) meanwhile.
    """
    with _unit(spark, lake, author, commit_message, commit_extra_info) as work:
        work.update(schema, table, assignments, condition)
    return work.committed


def truncate(spark: SparkSession, lake: DuckLake, schema: str, table: str, *, author: str | None = None,
             commit_message: str | None = None, commit_extra_info: str | None = None) -> Snapshot | None:
    """TRUNCATE schema.table: every data file ends and inlined rows end, in one snapshot (None if already empty)."""
    with _unit(spark, lake, author, commit_message, commit_extra_info) as work:
        work.truncate(schema, table)
    return work.committed


def insert_overwrite(spark: SparkSession, lake: DuckLake, schema: str, table: str, df: DataFrame, *,
                     dynamic_partitions: bool = False, author: str | None = None, commit_message: str | None = None,
                     commit_extra_info: str | None = None) -> Snapshot | None:
    """INSERT OVERWRITE: the DataFrame's rows replace the table's (or, with dynamic_partitions on a partitioned
    table, replace only the partitions the new rows fall in), in one snapshot. Old files end, none is rewritten.

    Raises:
        ValueError: dynamic_partitions on a table without partitioning.
        CommitConflictError: another writer changed the table meanwhile (the written files are removed).
    """
    with _unit(spark, lake, author, commit_message, commit_extra_info) as work:
        work.insert_overwrite(schema, table, df, dynamic_partitions=dynamic_partitions)
    return work.committed


def merge_into(spark: SparkSession, lake: DuckLake, schema: str, table: str, source: DataFrame, on: str, *,
               matched: str | None = None, matched_set: dict[str, str] | None = None,
               not_matched_insert: bool = False, not_matched_by_source_delete: bool = False,
               clauses: list[When] | None = None, author: str | None = None, commit_message: str | None = None,
               commit_extra_info: str | None = None) -> Snapshot | None:
    """MERGE INTO schema.table AS t USING source AS s ON <on>, as one snapshot, merge-on-read.

    Either the simple form: matched 'update' (SET from matched_set, or every column from s when None) or 'delete';
    not_matched_insert inserts source rows matching no target row (columns by name); not_matched_by_source_delete
    deletes target rows no source row matches. Or `clauses`: WHEN clauses in order, with conditions (the first whose
    condition holds applies, as in SQL). Updated rows keep their row ids. Target files whose statistics exclude the ON
    terms or the source's keys are not read. None when nothing changed.

    Raises:
        MergeCardinalityError: a target row is matched by several source rows (nothing is committed).
        CommitConflictError: another writer changed the same files (or the table) meanwhile.
    """
    whens = clauses if clauses is not None else clauses_of(matched, matched_set, not_matched_insert,
                                                           not_matched_by_source_delete)
    with _unit(spark, lake, author, commit_message, commit_extra_info) as work:
        work.merge(schema, table, source, on, whens)
    return work.committed


def _unit(spark: SparkSession, lake: DuckLake, author: str | None, commit_message: str | None,
          commit_extra_info: str | None) -> LakeWork:
    return LakeWork(spark, lake, author=author, commit_message=commit_message, commit_extra_info=commit_extra_info)
