"""Several statements, one snapshot: Spark computes and writes, the lake transaction stages, commit closes it.

`LakeWork` is what a SQL session's BEGIN ... COMMIT holds. Each method stages one statement's effect; data files are
written at once (by the executors) and remembered, so that a rollback, or a commit that definitely failed, removes
them. Reads inside the unit see the lake as of the last commit (the base snapshot), as DuckLake readers do.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from ..lake.errors import CommitStateUnknownError
from ..lake.lake import DuckLake
from ..lake.records import Column, Snapshot
from ..lake.transaction import Transaction
from . import dml
from .write import discard_files, stage_append, stage_create_table_as


class LakeWork:
    """The staged changes of one transaction of a SQL session."""

    def __init__(self, spark: SparkSession, lake: DuckLake) -> None:
        self.spark = spark
        self.lake = lake
        self.tx: Transaction = lake.transaction()
        self._written: list[tuple[list, str]] = []  # (files, table directory) written for this unit
        self.touched: set[tuple[str, str]] = set()  # (schema, name) of changed objects, lower case

    @property
    def is_empty(self) -> bool:
        return self.tx.is_empty

    def _touch(self, schema: str, name: str) -> None:
        self.touched.add((schema.lower(), name.lower()))

    # data ------------------------------------------------------------------------------------------------------
    def create_table_as(self, schema: str, table: str, df: DataFrame, *,
                        partition_by: Sequence[tuple[str, str]] | None = None, replace: bool = False,
                        comment: str | None = None, not_null: Sequence[str] = ()) -> None:
        files, table_dir = stage_create_table_as(self.spark, self.tx, schema, table, df, partition_by=partition_by,
                                                 replace=replace, comment=comment, not_null=not_null)
        self._written.append((files, table_dir))
        self._touch(schema, table)

    def create_table(self, schema: str, table: str, columns: Sequence[Column], *,
                     partition_by: Sequence[tuple[str, str]] | None = None, replace: bool = False,
                     comment: str | None = None) -> None:
        self.tx.create_table(schema, table, list(columns), partition_by=partition_by, replace=replace,
                             comment=comment)
        self._touch(schema, table)

    def insert(self, schema: str, table: str, df: DataFrame) -> int:
        """Rows written as new files of the table; returns the number of files."""
        files, table_dir = stage_append(self.spark, self.tx, schema, table, df)
        self._written.append((files, table_dir))
        self._touch(schema, table)
        return len(files)

    def _keep(self, done: dml.Staged) -> bool:
        self._written.append((done.files, done.table_dir))
        return done.changed

    def insert_overwrite(self, schema: str, table: str, df: DataFrame, *, dynamic_partitions: bool = False) -> bool:
        self._touch(schema, table)
        return self._keep(dml.stage_insert_overwrite(self.spark, self.tx, schema, table, df,
                                                     dynamic_partitions=dynamic_partitions))

    def delete(self, schema: str, table: str, condition: str | None) -> bool:
        self._touch(schema, table)
        return self._keep(dml.stage_delete(self.spark, self.tx, schema, table, condition))

    def update(self, schema: str, table: str, assignments: dict[str, str], condition: str | None) -> bool:
        self._touch(schema, table)
        return self._keep(dml.stage_update(self.spark, self.tx, schema, table, assignments, condition))

    def merge(self, schema: str, table: str, source: DataFrame, on: str, **kw: object) -> bool:
        self._touch(schema, table)
        return self._keep(dml.stage_merge(self.spark, self.tx, schema, table, source, on, **kw))  # type: ignore[arg-type]

    def truncate(self, schema: str, table: str) -> bool:
        self._touch(schema, table)
        return dml.stage_truncate(self.tx, schema, table).changed

    # closing ---------------------------------------------------------------------------------------------------
    def commit(self, *, author: str | None = None, commit_message: str | None = None,
               commit_extra_info: str | None = None) -> Snapshot | None:
        """One snapshot for everything staged (None if nothing was); written files go after a definite failure."""
        self.tx.author = author
        self.tx.commit_message = commit_message
        self.tx.commit_extra_info = commit_extra_info
        try:
            return self.tx.commit()
        except CommitStateUnknownError:
            raise  # the files may be referenced now: keep them
        except BaseException:
            self._discard()
            raise

    def rollback(self) -> None:
        self.tx.abandon()
        self._discard()

    def _discard(self) -> None:
        for files, table_dir in self._written:
            discard_files(files, table_dir)
        self._written.clear()
