"""Several statements, one snapshot: Spark computes and writes, the lake transaction stages, commit closes it.

`LakeWork` is what a SQL session's BEGIN ... COMMIT holds. Each method stages one statement's effect; data files are
written at once (by the executors) and remembered, so that a rollback, or a commit that definitely failed, removes
them. Reads inside the unit see the lake as of the last commit (the base snapshot), as DuckLake readers do.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..lake.clone import CloneUnsupportedError
from ..lake.errors import CommitStateUnknownError, NoSuchColumnError, NoSuchTableError
from ..lake.faults import fault_point
from ..lake.lake import DuckLake
from ..lake.paths import to_local
from ..lake.records import Column, Snapshot
from ..lake.transaction import Transaction
from . import dml
from .scan import file_uri
from .sql_literals import ident
from .types import spark_schema, to_spark
from .write import discard_files, stage_append, stage_create_table_as, write_files


class UnitOfWorkError(ValueError):
    """A statement the unit of work cannot apply as asked (the message says why and what to do instead)."""


class LakeWork:
    """The staged changes of one transaction of a SQL session."""

    def __init__(self, spark: SparkSession, lake: DuckLake) -> None:
        self.spark = spark
        self.lake = lake
        self.tx: Transaction = lake.transaction()
        self._written: list[tuple[list, str]] = []  # (files, table directory) written for this unit
        self.touched: set[tuple[str, str]] = set()  # (schema, name) of changed objects, lower case
        self._cloned: set[tuple[str, str]] = set()  # tables cloned in this unit: their files are staged at commit

    @property
    def is_empty(self) -> bool:
        return self.tx.is_empty

    def _touch(self, schema: str, name: str) -> None:
        self.touched.add((schema.lower(), name.lower()))

    # data ------------------------------------------------------------------------------------------------------
    def create_table_as(self, schema: str, table: str, df: DataFrame, *,
                        partition_by: Sequence[tuple[str, str]] | None = None, replace: bool = False,
                        comment: str | None = None, not_null: Sequence[str] = (),
                        types: Mapping[str, str] | None = None) -> None:
        files, table_dir = stage_create_table_as(self.spark, self.tx, schema, table, df, partition_by=partition_by,
                                                 replace=replace, comment=comment, not_null=not_null, types=types)
        self._written.append((files, table_dir))
        self._touch(schema, table)

    def clone_table(self, source_schema: str, source: str, schema: str, table: str, *, replace: bool = False) -> str:
        """CREATE [OR REPLACE] TABLE schema.table as a clone of a lake table at this unit's base snapshot: the
        lake links (or copies) its files (Transaction.clone_table); a table whose files the lake layer cannot reach
        (remote storage) is copied by Spark instead. Returns 'hard_link', 'file_copy' or 'spark_copy'."""
        try:
            kind = self.tx.clone_table(source_schema, source, schema, table, replace=replace)
        except CloneUnsupportedError:
            info = self.tx.base.table(source_schema, source)
            partition = [(info.column_by_id(f.column_id).name, f.transform)
                         for f in info.partition.fields] if info.partition else None
            self.create_table_as(schema, table, self.spark.table(f"{ident(source_schema)}.{ident(source)}"),
                                 partition_by=partition, replace=replace, comment=info.comment)
            kind = "spark_copy"
        self._cloned.add((schema.lower(), table.lower()))
        self._touch(schema, table)
        return kind

    def create_table(self, schema: str, table: str, columns: Sequence[Column], *,
                     partition_by: Sequence[tuple[str, str]] | None = None, replace: bool = False,
                     comment: str | None = None) -> None:
        self.tx.create_table(schema, table, list(columns), partition_by=partition_by, replace=replace,
                             comment=comment)
        self._touch(schema, table)

    def insert(self, schema: str, table: str, df: DataFrame) -> int:
        """Rows written as new files of the table; returns the number of files."""
        return len(self._append(schema, table, df))

    def insert_rows(self, schema: str, table: str, df: DataFrame) -> int:
        """Rows written as new files of the table; returns the number of rows (from the files' footers)."""
        return sum(f.record_count for f in self._append(schema, table, df))

    def _append(self, schema: str, table: str, df: DataFrame) -> list:
        files, table_dir = stage_append(self.spark, self.tx, schema, table, df)
        self._written.append((files, table_dir))
        self._touch(schema, table)
        return files

    def _reads_base(self, statement: str, schema: str, table: str) -> None:
        """DML finds its rows in the last committed snapshot: refuse a target this unit already changed (other than
        by creating it, see _rewrite_new), rather than silently miss the unit's own changes."""
        if (schema.lower(), table.lower()) in self.touched:
            raise UnitOfWorkError(
                f"{statement} of {schema}.{table} after it was changed in the same transaction is not supported: it "
                "would not see the transaction's own changes. Run it after the commit (in dbt: a hook with "
                "inside_transaction=false, e.g. after_commit(...))")

    def _is_new(self, schema: str, table: str) -> bool:
        try:
            return self.tx.is_new_table(schema, table)
        except NoSuchTableError:
            return False

    def _rewrite_new(self, schema: str, table: str, select: Callable[[str, list[str]], str], *,
                     adds: bool = False) -> bool:
        """DML on a table created in this unit: its staged files are read, changed by Spark and written again in
        their place (nothing is committed yet, so no delete files). select(view, columns) gives the new rows; adds:
        the statement can add rows to an empty table (a MERGE), else an empty table is left as it is."""
        info = self.tx.table(schema, table)
        old = self.tx.staged_files(schema, table)
        if (schema.lower(), table.lower()) in self._cloned:
            raise UnitOfWorkError(f"{schema}.{table} was cloned in this transaction: change it after the commit")
        if not old and not adds:
            return False
        view = f"__ducklake_staged_{uuid.uuid4().hex[:12]}"
        if old:
            raw = self.spark.read.option("mergeSchema", "true").parquet(*[file_uri(f.path) for f in old])
        else:
            raw = self.spark.createDataFrame([], spark_schema(info.columns))
        present = {c.lower() for c in raw.columns}
        cols = [F.col(ident(c.name)) if c.name.lower() in present else F.lit(None).cast(to_spark(c)).alias(c.name)
                for c in info.columns]  # files written before an ADD COLUMN lack it
        raw.select(*cols).createOrReplaceTempView(view)
        try:
            rows = self.spark.sql(select(view, [c.name for c in info.columns]))
            table_dir = self.tx.table_path(info)
            new = write_files(self.spark, rows, info, table_dir)
        finally:
            self.spark.catalog.dropTempView(view)
        self.tx.replace_staged_files(schema, table, new)
        self._written.append((new, table_dir))
        discard_files(old, table_dir)  # staged only: nothing references them
        return True

    def _keep(self, done: dml.Staged) -> bool:
        self._written.append((done.files, done.table_dir))
        return done.changed

    def insert_overwrite(self, schema: str, table: str, df: DataFrame, *, dynamic_partitions: bool = False) -> bool:
        self._touch(schema, table)
        return self._keep(dml.stage_insert_overwrite(self.spark, self.tx, schema, table, df,
                                                     dynamic_partitions=dynamic_partitions))

    def delete(self, schema: str, table: str, condition: str | None) -> bool:
        if self._is_new(schema, table):
            keep = f"NOT coalesce(({condition}), false)" if condition else "false"
            return self._rewrite_new(schema, table, lambda v, cols: f"SELECT * FROM {v} t WHERE {keep}")
        self._reads_base("DELETE", schema, table)
        self._touch(schema, table)
        return self._keep(dml.stage_delete(self.spark, self.tx, schema, table, condition))

    def update(self, schema: str, table: str, assignments: dict[str, str], condition: str | None) -> bool:
        if self._is_new(schema, table):
            sets = {k.lower(): v for k, v in assignments.items()}
            known = {c.name.lower() for c in self.tx.table(schema, table).columns}
            if set(sets) - known:
                raise NoSuchColumnError(f"UPDATE of {schema}.{table}: no column {sorted(set(sets) - known)} "
                                        f"(columns: {sorted(known)})")
            cond = f"coalesce(({condition}), false)" if condition else "true"

            def select(view: str, cols: list[str]) -> str:
                exprs = [f"CASE WHEN {cond} THEN ({sets[c.lower()]}) ELSE {ident(c)} END AS {ident(c)}"
                         if c.lower() in sets else ident(c) for c in cols]
                return f"SELECT {', '.join(exprs)} FROM {view} t"

            return self._rewrite_new(schema, table, select)
        self._reads_base("UPDATE", schema, table)
        self._touch(schema, table)
        return self._keep(dml.stage_update(self.spark, self.tx, schema, table, assignments, condition))

    def merge(self, schema: str, table: str, source: DataFrame, on: str, clauses: list[dml.When]) -> bool:
        if self._is_new(schema, table):
            with dml.source_view(source) as src:
                return self._rewrite_new(schema, table, lambda v, cols: dml.merged_rows_sql(
                    self.spark, v, src, cols, on, clauses, schema, table), adds=True)
        self._reads_base("MERGE", schema, table)
        self._touch(schema, table)
        return self._keep(dml.stage_merge(self.spark, self.tx, schema, table, source, on, clauses))

    def truncate(self, schema: str, table: str) -> bool:
        self._touch(schema, table)
        return dml.stage_truncate(self.tx, schema, table).changed

    # closing ---------------------------------------------------------------------------------------------------
    def commit(self, *, author: str | None = None, commit_message: str | None = None,
               commit_extra_info: str | None = None) -> Snapshot | None:
        """One snapshot for everything staged (None if nothing was); written files go after a definite failure."""
        fault_point("files_written")
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

    def discard_unreferenced(self) -> None:
        """Remove the files staged for objects this unit created and then dropped or replaced: the transaction
        unstaged them, so no commit will reference them."""
        files = self.tx.take_unreferenced_files()
        if files:
            dirs = {os.path.dirname(os.path.abspath(to_local(f.path))) for f in files}
            discard_files(files, os.path.dirname(os.path.commonpath(sorted(dirs))))

    def rollback(self) -> None:
        self.tx.abandon()
        self._discard()

    def _discard(self) -> None:
        for files, table_dir in self._written:
            discard_files(files, table_dir)
        self._written.clear()
