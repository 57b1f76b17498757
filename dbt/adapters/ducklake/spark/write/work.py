"""Several statements, one snapshot: Spark computes and writes, the lake transaction stages, commit closes it.

`LakeWork` is what a SQL session's BEGIN ... COMMIT holds, and what the one-shot functions of one_shot.py are
shorthands over. Each method stages one statement's effect; data files are written at once (by the executors) and
owned by the lake transaction, which removes them after a rollback or a commit that definitely failed (and never
once the COMMIT succeeded or may have: Transaction.own_files). Reads inside the unit see the lake as of the last
commit (the base snapshot), as DuckLake readers do. Usable as a context manager: commits on a clean exit, rolls
back on an exception.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa
import sqlglot
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot.errors import ParseError

from ...lake.catalog.lookups import ci_lookup
from ...lake.catalog.state import LakeState
from ...lake.errors import NoSuchColumnError, NoSuchTableError
from ...lake.faults import fault_point
from ...lake.lake import DuckLake
from ...lake.paths import discard_files, file_io, join_path
from ...lake.records import Column, Snapshot, TableInfo
from ...lake.write.clone import CloneUnsupportedError
from ...lake.write.transaction import Transaction
from ..read.names import SPARK_SQL_TAG
from ..read.scan import file_uri
from ..sql_literals import ident
from ..types import from_spark, keep_stored_types, spark_schema, to_spark
from . import dml
from .write import (
    stage_append,
    stage_create_table_as,
    stage_create_table_from_arrow,
    structs_by_name,
    write_files,
)


class UnitOfWorkError(ValueError):
    """A statement the unit of work cannot apply as asked (the message says why and what to do instead)."""


class LakeWork:
    """The staged changes of one transaction of a SQL session."""

    def __init__(self, spark: SparkSession, lake: DuckLake, *, author: str | None = None,
                 commit_message: str | None = None, commit_extra_info: str | None = None,
                 base: LakeState | None = None) -> None:
        self.spark = spark
        self.lake = lake
        self.tx: Transaction = lake.transaction(author=author, commit_message=commit_message,
                                                commit_extra_info=commit_extra_info, base=base)
        self.touched: set[tuple[str, str]] = set()  # (schema, name) of changed objects, lower case
        self._cloned: set[tuple[str, str]] = set()  # tables cloned in this unit: their files are staged at commit
        self._scratch: str | None = None  # see scratch_dir
        self._read_sql: dict[tuple[str, str], tuple[int, str | None]] = {}  # see read_sql

    @property
    def is_empty(self) -> bool:
        return self.tx.is_empty

    @property
    def committed(self) -> Snapshot | None:
        """The snapshot the commit wrote (None before it, or when nothing was staged)."""
        return self.tx.committed

    def __enter__(self) -> LakeWork:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    def _touch(self, schema: str, name: str) -> None:
        self.touched.add((schema.lower(), name.lower()))

    # reading the staged state ---------------------------------------------------------------------------------
    def read_sql(self, schema: str, name: str) -> str | None:
        """Spark SQL of an object as this unit has it (staged_reads.staged_sql): None when the unit did not change
        it, staged_reads.ABSENT when it dropped it. Cached while nothing more is staged."""
        from .staged_reads import staged_sql

        key = (schema.lower(), name.lower())
        hit = self._read_sql.get(key)
        if hit is not None and hit[0] == self.tx.version:
            return hit[1]
        sql = staged_sql(self, schema, name, SPARK_SQL_TAG)
        self._read_sql[key] = (self.tx.version, sql)
        return sql

    def scratch_dir(self) -> str:
        """A directory in the data path for files that only reads of the staged state use: removed with the unit."""
        if self._scratch is None:
            from .staged_reads import SCRATCH_PREFIX

            # a prefix on S3 (made by its first file), a directory locally
            self._scratch = join_path(self.lake.data_path, f"{SCRATCH_PREFIX}{uuid.uuid4().hex[:12]}")
        return self._scratch

    def _drop_scratch(self) -> None:
        if self._scratch is not None:
            file_io(self._scratch).delete_dir(self._scratch)
            self._scratch = None

    # DDL -------------------------------------------------------------------------------------------------------
    # Objects created, dropped or renamed are touched (their Spark names are refreshed after the commit, and DML
    # later in the unit refuses them: see _reads_base); column changes are not: DML later in the unit reads the
    # committed rows through them (dml.evolved_columns).
    def table(self, schema: str, table: str) -> TableInfo:
        """The table as this unit has it (NoSuchTableError if it has none)."""
        return self.tx.table(schema, table)

    def exists(self, schema: str, table: str) -> bool:
        """Whether the table exists as this unit has it."""
        try:
            self.tx.table(schema, table)
            return True
        except NoSuchTableError:
            return False

    def create_schema(self, name: str, *, if_not_exists: bool = False) -> None:
        if not (if_not_exists and self.tx.has_schema(name)):
            self.tx.create_schema(name)

    def drop_schema(self, name: str, *, cascade: bool = False, if_exists: bool = False) -> None:
        self.tx.drop_schema(name, cascade=cascade, if_exists=if_exists)

    def drop(self, schema: str, name: str, *, what: str = "table", if_exists: bool = False) -> None:
        """DROP TABLE or DROP VIEW of a lake object (a view by that name only when no table has it).

        Raises:
            NoSuchTableError: nothing of that name, and not if_exists.
        """
        tx = self.tx
        is_view = ci_lookup(tx.base.views, (schema, name)) is not None
        is_table = ci_lookup(tx.base.tables, (schema, name)) is not None or self.exists(schema, name)
        if is_view and not is_table:
            tx.drop_view(schema, name, if_exists=if_exists)
        elif is_table:
            tx.drop_table(schema, name, if_exists=if_exists)
        elif not if_exists:
            raise NoSuchTableError(f"{what} {schema}.{name} does not exist")
        self._touch(schema, name)

    def rename(self, schema: str, name: str, new_name: str) -> None:
        """ALTER TABLE|VIEW ... RENAME TO new_name."""
        if ci_lookup(self.tx.base.views, (schema, name)) is not None:
            self.tx.rename_view(schema, name, new_name)
        else:
            self.tx.rename_table(schema, name, new_name)
        self._touch(schema, new_name)
        self._touch(schema, name)

    def create_view(self, schema: str, name: str, query: str, *, replace: bool = False,
                    comment: str | None = None) -> None:
        """CREATE [OR REPLACE] VIEW as a DuckLake view DuckDB can read (the query transpiled to DuckDB SQL when
        sqlglot can, else kept as Spark SQL), with the Spark text as a tag for Spark (spark.read.names).

        Raises:
            AnalysisException: the query does not analyse (nothing is staged).
        """
        self.spark.sql(query).schema  # noqa: B018 - analyse now: a broken view fails before anything is staged
        try:
            duck_sql, dialect = sqlglot.transpile(query, read="spark", write="duckdb")[0], "duckdb"
        except (ParseError, ValueError):
            duck_sql, dialect = query, "spark"
        if replace and ci_lookup(self.tx.base.tables, (schema, name)) is not None:
            self.tx.drop_table(schema, name)  # CREATE OR REPLACE VIEW over a table (a model switching materialization)
        self.tx.create_view(schema, name, duck_sql, dialect=dialect, replace=replace, comment=comment)
        self.tx.set_tag(schema, name, SPARK_SQL_TAG, query)
        self._touch(schema, name)

    def set_tag(self, schema: str, name: str, key: str, value: str | None) -> None:
        """A tag on a table or view (None removes it), e.g. a change-feed cursor committed with the rows."""
        self.tx.set_tag(schema, name, key, value)

    def add_columns(self, schema: str, table: str, columns: Sequence[Column]) -> None:
        for col in columns:
            self.tx.add_column(schema, table, col)

    def drop_column(self, schema: str, table: str, column: str) -> None:
        self.tx.drop_column(schema, table, column)

    def add_field(self, schema: str, table: str, path: Sequence[str], field: Column) -> None:
        """ADD COLUMN s.f: a field of a nested column (Transaction.add_field)."""
        self.tx.add_field(schema, table, path, field)

    def drop_field(self, schema: str, table: str, path: Sequence[str]) -> None:
        self.tx.drop_field(schema, table, path)

    def rename_column(self, schema: str, table: str, path: Sequence[str], new_name: str) -> None:
        """RENAME COLUMN: a top-level column (path of one name) or a field of a nested column."""
        if len(path) == 1:
            self.tx.rename_column(schema, table, path[0], new_name)
        else:
            self.tx.rename_field(schema, table, path, new_name)

    def alter_column_type(self, schema: str, table: str, column: str, spark_type: str) -> None:
        """ALTER COLUMN ... TYPE, the new type in Spark SQL: a widening (Transaction.alter_column_type), or a nested
        column's new type, whose fields are added, dropped or widened (Transaction.evolve_column)."""
        field = self.spark.createDataFrame([], f"x {spark_type}").schema.fields[0]
        target = from_spark(field, iter(range(1, 10**6)).__next__)
        current = self.table(schema, table).column(column)
        if current.is_nested or target.is_nested:
            self.tx.evolve_column(schema, table, column, keep_stored_types(current, target))
        else:
            self.tx.alter_column_type(schema, table, column, target.type)

    def set_column_nullable(self, schema: str, table: str, column: str, nullable: bool) -> None:
        self.tx.set_column_nullable(schema, table, column, nullable)

    def comment(self, schema: str, name: str, text: str | None, *, column: str | None = None) -> int:
        """COMMENT ON a table, view or column; an unchanged comment is no change (no snapshot). Returns 0 for a
        column the table does not have (dbt documents columns a model may not have), else -1."""
        tx = self.tx
        try:
            info = tx.table(schema, name)
        except NoSuchTableError:
            info = None
        if column is not None and info is None:
            # a view's column: DuckLake 1.1 keeps its comment by name; a 1.0 catalog has nowhere to keep it
            try:
                view = tx.view(schema, name)  # staged: the model's own view, created in this commit
            except NoSuchTableError:
                return 0
            if not tx.base.db.spec.view_column_tags:
                return 0
            current = view.column_tags.get(column, {}).get("comment")
        elif column is not None:
            col = next((c for c in info.columns if c.name.lower() == column.lower()), None) if info else None
            if col is None:
                return 0
            current = info.column_tags.get(col.column_id, {}).get("comment") if info else None
        elif info is not None:
            current = info.comment
        else:
            view = ci_lookup(tx.base.views, (schema, name))
            current = view.comment if view is not None else None
        if current != text:
            tx.set_comment(schema, name, text, column=column)
        return -1

    # data ------------------------------------------------------------------------------------------------------
    def create_table_as(self, schema: str, table: str, df: DataFrame, *,
                        partition_by: Sequence[tuple[str, str]] | None = None, replace: bool = False,
                        comment: str | None = None, not_null: Sequence[str] = (),
                        types: Mapping[str, str] | None = None, bounded: bool = False,
                        sorted_by: str | None = None, table_options: Mapping[str, str] | None = None) -> None:
        """CREATE [OR REPLACE] TABLE ... AS the DataFrame (replacing a view of that name too: a model switching from
        view to table is still one snapshot). bounded: df is a small inline table (`write.write_files`).
        sorted_by, table_options: the table's layout (`Transaction.set_layout`)."""
        if replace and ci_lookup(self.tx.base.views, (schema, table)) is not None:
            self.tx.drop_view(schema, table)
        stage_create_table_as(self.spark, self.tx, schema, table, df, partition_by=partition_by, replace=replace,
                              comment=comment, not_null=not_null, types=types, bounded=bounded,
                              sorted_by=sorted_by, table_options=table_options)
        self._touch(schema, table)

    def create_table_from_arrow(self, schema: str, table: str, spark_types: T.StructType, data: pa.Table, *,
                                replace: bool = False, sorted_by: str | None = None,
                                table_options: Mapping[str, str] | None = None) -> None:
        """CREATE [OR REPLACE] TABLE ... AS rows the driver holds, typed as a DataFrame of spark_types would be
        (`write.stage_create_table_from_arrow`), with the layout of `create_table_as`."""
        if replace and ci_lookup(self.tx.base.views, (schema, table)) is not None:
            self.tx.drop_view(schema, table)
        stage_create_table_from_arrow(self.tx, schema, table, spark_types, data, replace=replace,
                                      sorted_by=sorted_by, table_options=table_options)
        self._touch(schema, table)

    def clone_table(self, source_schema: str, source: str, schema: str, table: str, *, replace: bool = False) -> str:
        """CREATE [OR REPLACE] TABLE schema.table as a clone of a lake table at this unit's base snapshot: the
        lake links (or copies) its files (Transaction.clone_table); a table whose files the lake layer cannot reach
        (storage other than local or S3) is copied by Spark instead. Returns 'hard_link', 'file_copy' or 'spark_copy'."""
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
                     comment: str | None = None, sorted_by: str | None = None,
                     table_options: Mapping[str, str] | None = None) -> None:
        self.tx.create_table(schema, table, list(columns), partition_by=partition_by, replace=replace,
                             comment=comment)
        self.tx.set_layout(schema, table, sorted_by, table_options)
        self._touch(schema, table)

    def set_layout(self, schema: str, table: str, sorted_by: str | None,
                   table_options: Mapping[str, str] | None) -> None:
        """The table's sort keys and write options (`Transaction.set_layout`: only what changes is staged); the
        unit's later writes to it follow them."""
        self.tx.set_layout(schema, table, sorted_by, table_options)

    def insert(self, schema: str, table: str, df: DataFrame) -> int:
        """Rows written as new files of the table; returns the number of files."""
        return len(self._append(schema, table, df))

    def insert_rows(self, schema: str, table: str, df: DataFrame) -> int:
        """Rows written as new files of the table; returns the number of rows (from the files' footers)."""
        return sum(f.record_count for f in self._append(schema, table, df))

    def _append(self, schema: str, table: str, df: DataFrame) -> list:
        files = stage_append(self.spark, self.tx, schema, table, df)
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
                     adds: bool = False) -> int:
        """DML on a table created in this unit: its staged files are read, changed by Spark and written again in
        their place (nothing is committed yet, so no delete files). select(view, columns) gives the new rows; adds:
        the statement can add rows to an empty table (a MERGE), else an empty table is left as it is. Returns the
        change in the table's row count (what a DELETE removed; UPDATE and MERGE rows are not counted here)."""
        info = self.tx.table(schema, table)
        old = self.tx.staged_files(schema, table)
        if (schema.lower(), table.lower()) in self._cloned:
            raise UnitOfWorkError(f"{schema}.{table} was cloned in this transaction: change it after the commit")
        if not old and not adds:
            return 0
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
            new = write_files(self.spark, rows, info, table_dir, options=self.tx.write_options(info))
        finally:
            self.spark.catalog.dropTempView(view)
        self.tx.own_files([f.path for f in new], table_dir)
        self.tx.replace_staged_files(schema, table, new)
        discard_files([f.path for f in old], table_dir)  # staged only: nothing references them
        return sum(f.record_count for f in old) - sum(f.record_count for f in new)

    def insert_overwrite(self, schema: str, table: str, df: DataFrame, *, dynamic_partitions: bool = False) -> int:
        """The rows replace the table's (or, with dynamic_partitions, those of the partitions they fall in); returns
        the number of rows written."""
        self._touch(schema, table)
        return (dml.stage_insert_overwrite(self.spark, self.tx, schema, table, df,
                                                     dynamic_partitions=dynamic_partitions)).rows

    def delete(self, schema: str, table: str, condition: str | None) -> int:
        """DELETE FROM schema.table [WHERE condition]; returns the number of rows deleted."""
        if self._is_new(schema, table):
            keep = f"NOT coalesce(({condition}), false)" if condition else "false"
            return self._rewrite_new(schema, table, lambda v, cols: f"SELECT * FROM {v} t WHERE {keep}")
        self._reads_base("DELETE", schema, table)
        self._touch(schema, table)
        return dml.stage_delete(self.spark, self.tx, schema, table, condition).rows

    def update(self, schema: str, table: str, assignments: dict[str, str], condition: str | None) -> int:
        """UPDATE schema.table SET ... [WHERE condition]; returns the number of rows updated (-1 on a table created
        in this unit: its files are rewritten, rows are not counted)."""
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

            self._rewrite_new(schema, table, select)
            return -1
        self._reads_base("UPDATE", schema, table)
        self._touch(schema, table)
        return dml.stage_update(self.spark, self.tx, schema, table, assignments, condition).rows

    def merge(self, schema: str, table: str, source: DataFrame, on: str, clauses: list[dml.When]) -> int:
        """MERGE INTO schema.table; returns the number of target rows deleted or updated plus the rows inserted (-1
        on a table created in this unit: its files are rewritten, rows are not counted)."""
        source = structs_by_name(source, self.table(schema, table))  # Spark assigns structs by position
        if self._is_new(schema, table):
            with dml.source_view(source) as src:
                self._rewrite_new(schema, table, lambda v, cols: dml.merged_rows_sql(
                    self.spark, v, src, cols, on, clauses, schema, table), adds=True)
            return -1
        self._reads_base("MERGE", schema, table)
        self._touch(schema, table)
        return dml.stage_merge(self.spark, self.tx, schema, table, source, on, clauses).rows

    def truncate(self, schema: str, table: str) -> bool:
        self._touch(schema, table)
        return dml.stage_truncate(self.tx, schema, table).changed

    # closing ---------------------------------------------------------------------------------------------------
    def commit(self, *, author: str | None = None, commit_message: str | None = None,
               commit_extra_info: str | None = None) -> Snapshot | None:
        """One snapshot for everything staged (None if nothing was); the transaction removes the written files after
        a definite failure.

        Raises:
            CommitConflictError: another writer committed a conflicting change (the reference's rules).
            CommitStateUnknownError: the catalog failed while committing; the files are kept.
        """
        fault_point("files_written")
        self.tx.author = author if author is not None else self.tx.author
        self.tx.commit_message = commit_message if commit_message is not None else self.tx.commit_message
        self.tx.commit_extra_info = commit_extra_info if commit_extra_info is not None else self.tx.commit_extra_info
        try:
            return self.tx.commit()
        finally:
            self._drop_scratch()

    def discard_unreferenced(self) -> None:
        """Remove the files staged for objects this unit created and then dropped or replaced: the transaction
        unstaged them, so no commit will reference them."""
        files = self.tx.take_unreferenced_files()
        if files:
            dirs = sorted(f.path.rsplit("/", 1)[0] for f in files)
            common = dirs[0]
            while not all(d == common or d.startswith(common + "/") for d in dirs):
                common = common.rsplit("/", 1)[0]
            discard_files([f.path for f in files], common.rsplit("/", 1)[0])

    def rollback(self) -> None:
        """Discard everything staged, and the files written for it."""
        self.tx.abandon()
        self._drop_scratch()
