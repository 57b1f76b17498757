"""Transactions: stage changes against a snapshot, then commit them as ONE snapshot with the reference's retries."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import sqlalchemy as sa

from ..catalog.database import CatalogDB
from ..catalog.lookups import ci_lookup
from ..catalog.state import LakeState, latest_snapshot, load_state
from ..errors import (
    CatalogConnectionError,
    CommitConflictError,
    CommitStateUnknownError,
    DuckLakeError,
    TransactionClosedError,
    TransactionOrderError,
)
from ..paths import discard_files, file_io
from ..read.deletes import DeletePositions
from ..records import Column, Snapshot, TableInfo, ViewInfo
from ..types import parse_type
from . import commit_outcome
from . import operations as ops
from .builder import CatalogBuilder
from .catalog_view import CatalogView, ColumnIdReader
from .clone import FILE_COPY, CloneData, plan_clone, probe_links
from .conflicts import check_conflicts
from .datafiles import DataFileSpec
from .delete_files import DeleteFileSpec
from .inlined_rows import remove_inlined_files

if TYPE_CHECKING:
    from .lake_handle import LakeHandle
    from .layout import WriteOptions

logger = logging.getLogger(__name__)
_sleep = time.sleep  # the retries' wait (tests replace it here, not in the time module every thread shares)

# The reference's retry policy (ducklake_max_retry_count, ducklake_retry_wait_ms, ducklake_retry_backoff).
MAX_RETRIES = 10
RETRY_WAIT_SECONDS = 0.1
RETRY_BACKOFF = 1.5


class Transaction:
    """Changes staged against a base snapshot; `commit()` writes them as one snapshot, or nothing at all.

    Files written for it (`own_files`) are removed when it is abandoned or its commit definitely fails, and kept
    once the COMMIT succeeded or may have (see commit_outcome): the one place that decides what happens to a
    writer's files. Usable as a context manager: commits on a clean exit, abandons on an exception.
    """

    def __init__(
        self,
        lake: LakeHandle,
        *,
        author: str | None = None,
        commit_message: str | None = None,
        commit_extra_info: str | None = None,
        base_snapshot: int | None = None,
        base: LakeState | None = None,
    ) -> None:
        self.lake = lake
        self.author = author
        self.commit_message = commit_message
        self.commit_extra_info = commit_extra_info
        # a state the caller just learned is the latest (a statement's names) saves a catalog round trip; an older
        # one only means a later base: the commit checks what was committed since, as for any base
        self.base: LakeState = base if base is not None else lake.snapshot(base_snapshot)
        self._ops: list[ops.Operation] = []
        # validates staged DDL and gives new columns the ids the commit gives them (files written in the transaction
        # carry them); the commit replays the operations on the catalog
        self._column_ids = ColumnIdReader(lake.db)
        self._staged = CatalogView(self.base, self._column_ids)
        self._closed = False
        self.committed: Snapshot | None = None
        self.unreferenced_files: list[DataFileSpec] = []  # see take_unreferenced_files
        self._owned: list[tuple[tuple[str, ...], str | None]] = []  # (paths, root) written for it: see own_files
        self._version = 0  # see version
        self._inlining_limits: dict[tuple[str, str], int] = {}  # see set_inlining_limit
        self._table_options: dict[int, dict[str, str]] = {}  # staged table options by (staged) table id
        self._option_rows: list[tuple[str | None, int | None, str, str]] | None = None  # see write_options

    # context manager --------------------------------------------------------------------------------------------
    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None and not self._closed:
            self.commit()
        else:
            self.abandon()

    # files written for it ---------------------------------------------------------------------------------------
    def own_files(self, paths: Iterable[str], root: str | None = None) -> None:
        """Files written for this transaction (data or delete files): removed if it is abandoned or its commit
        definitely fails, kept once the COMMIT succeeded or may have. root: directories below it that the removal
        leaves empty go too (a table's partition directories)."""
        paths = tuple(paths)
        if paths:
            self._owned.append((paths, root))

    def owned_mark(self) -> int:
        """A mark of the files owned so far, for discard_owned_since."""
        return len(self._owned)

    def discard_owned_since(self, mark: int) -> None:
        """Remove the files owned after mark (a statement that failed before it staged anything, and runs again)."""
        later, self._owned = self._owned[mark:], self._owned[:mark]
        for paths, root in later:
            discard_files(paths, root)

    def _discard_owned(self) -> None:
        self.discard_owned_since(0)

    # the staged view --------------------------------------------------------------------------------------------
    def table(self, schema: str, name: str) -> TableInfo:
        """The table as this transaction has it (with staged columns)."""
        return self._staged.table(schema, name)

    def view(self, schema: str, name: str) -> ViewInfo:
        return self._staged.view(schema, name)

    def table_path(self, table: TableInfo) -> str:
        """The directory of a table as this transaction has it (its schema may be staged too)."""
        return self._staged.table_path(table)

    def is_new_table(self, schema: str, name: str) -> bool:
        """Whether the table is created (or re-created) in this transaction."""
        return self.table(schema, name).table_id in self._staged.created_table_ids

    def staged_files(self, schema: str, name: str) -> list[DataFileSpec]:
        """The data files staged for a table in this transaction (for engines that must read their own writes)."""
        return [f for op in self._ops if _adds_to(op, schema, name) for f in op.files]  # type: ignore[attr-defined]

    def staged_deletes(self, schema: str, name: str) -> tuple[dict[int, set[int]], set[int]]:
        """The rows of a table's committed files that this transaction deletes: {data_file_id: positions} and the
        row ids of inlined rows (for engines that must read their own writes)."""
        files: dict[int, set[int]] = {}
        inlined: set[int] = set()
        for op in self._ops:
            if getattr(op, "schema", "").lower() != schema.lower() or getattr(op, "table", "").lower() != name.lower():
                continue
            if isinstance(op, ops.DeleteRows):
                files.setdefault(op.data_file_id, set()).update(op.positions)
            elif isinstance(op, ops.DeleteInlinedRows):
                inlined.update(op.row_ids)
        return files, inlined

    def replace_staged_files(self, schema: str, name: str, files: Iterable[DataFileSpec]) -> None:
        """Swap the files staged for a table created in this transaction (copy-on-write inside the transaction:
        nothing was committed, so nothing needs a delete file). The caller removes the old files."""
        if not self.is_new_table(schema, name):
            raise TransactionOrderError(f"{schema}.{name} was not created in this transaction: change it with deletes")
        self._ops = [op for op in self._ops if not _adds_to(op, schema, name)]
        self._version += 1
        files = tuple(files)
        if files:
            self.add_data_files(schema, name, files)

    def has_schema(self, name: str) -> bool:
        return any(s.lower() == name.lower() for s in self._staged.schemas)

    @property
    def version(self) -> int:
        """Changes with every operation staged or unstaged (what a reader of the staged state caches by)."""
        return self._version

    @property
    def is_empty(self) -> bool:
        return not self._ops

    def stage(self, op: ops.Operation) -> None:
        """Stage an operation (the typed methods below build theirs; maintenance stages its own, e.g. compaction).

        Raises:
            TransactionClosedError: the transaction was committed or abandoned.
        """
        if self._closed:
            raise TransactionClosedError("this transaction has already been committed or abandoned")
        self._bind(op)
        self._record(op)
        self._version += 1

    def _record(self, op: ops.Operation) -> None:
        """Apply a (bound) operation to the staged view, or note what a data operation touches, and keep it."""
        if isinstance(op, ops.DdlOperation):
            op.apply(self._staged)  # validates now, with a clear error, before anything is written
        else:
            # data operations run at commit; here they only check the table and note what they touch
            info = ops.bound_table(self._staged, op, op.table)  # type: ignore[attr-defined]
            if isinstance(op, ops.SetTableOptions):  # this transaction's writes to the table use them at once
                self._table_options.setdefault(info.table_id, {}).update(op.options)
            changes = self._staged.changes
            if info.table_id in self._staged.created_table_ids:
                self._ops.append(op)  # a new table's provisional id means nothing to other writers
                return
            if isinstance(op, ops.AddDataFiles):
                changes.inserted_tables.add(info.table_id)
            elif isinstance(op, ops.DeleteRows):
                changes.deleted_tables.add(info.table_id)
                changes.deleted_files.add(op.data_file_id)
            elif isinstance(op, ops.DeleteInlinedRows):
                changes.inlined_deleted.add(info.table_id)
        self._ops.append(op)

    def _follow(self, created: int) -> tuple[str | None, set[int]]:
        """The name an object created by operation `created` has after the later operations (None once dropped or
        replaced), and the indexes of the operations on it (by name: a created object is never bound by id)."""
        first = self._ops[created]
        schema, current = first.schema.lower(), first.name  # type: ignore[attr-defined]
        touching: set[int] = set()
        for i in range(created + 1, len(self._ops)):
            op = self._ops[i]
            if op.bound_table_id is not None or getattr(op, "schema", "").lower() != schema:
                continue
            on_columns = isinstance(op, ops.AddDataFiles | ops.AddColumn | ops.RemoveColumn | ops.AlterColumn
                                    | ops.ChangeField | CloneData)
            target = getattr(op, "table" if on_columns else "name", None)
            if not isinstance(target, str) or target.lower() != current.lower():
                continue
            if isinstance(op, ops.AddTable | ops.AddView):
                return None, touching  # a later object of the same name replaced it
            touching.add(i)
            if isinstance(op, ops.RenameTable | ops.RenameView):
                current = op.new_name
            elif isinstance(op, ops.RemoveTable | ops.RemoveView):
                return None, touching
        return current, touching

    def take_unreferenced_files(self) -> list[DataFileSpec]:
        """Data files staged for objects that this transaction created and then dropped or replaced: no commit will
        reference them, so the caller that wrote them removes them."""
        files, self.unreferenced_files = self.unreferenced_files, []
        return files

    def _unstage_created(self, schema: str, name: str, *, view: bool) -> bool:
        """Drop an object created in this transaction the way the reference does: nothing of it is committed (its
        creation and every later change to it are unstaged; what a CREATE OR REPLACE replaced stays dropped), and
        its staged data files go to `unreferenced_files`. False if the object was not created in this transaction."""
        create_kind = ops.AddView if view else ops.AddTable
        found: int | None = None
        names: set[int] = set()  # indexes of the operations on the created object
        for c, op in enumerate(self._ops):
            if isinstance(op, (ops.AddView, ops.AddTable)) and isinstance(op, create_kind) \
                    and op.schema.lower() == schema.lower():
                final, touching = self._follow(c)
                if final is not None and final.lower() == name.lower():
                    found, names = c, touching
        if found is None:
            return False
        created = self._ops[found]
        assert isinstance(created, (ops.AddView, ops.AddTable))
        kept: list[ops.Operation] = self._ops[:found]
        replaced: list[ops.Operation] = []
        if getattr(created, "replace", False):
            # what the CREATE OR REPLACE replaced (if anything) is dropped all the same
            replaced = [ops.RemoveTable(created.schema, created.name, if_exists=True),
                        ops.RemoveView(created.schema, created.name, if_exists=True)]
            kept += replaced
        files: list[DataFileSpec] = []
        for i, op in enumerate(self._ops[found + 1:], start=found + 1):
            if i in names:
                if isinstance(op, ops.AddDataFiles):
                    files.extend(op.files)
                continue
            kept.append(op)
        self._ops = []
        self._staged = CatalogView(self.base, self._column_ids)
        self._table_options = {}  # by provisional ids: replayed with the operations kept
        for op in kept:
            if any(op is r for r in replaced):
                objects = self._staged.tables if isinstance(op, ops.RemoveTable) else self._staged.views
                if ci_lookup(objects, (op.schema, op.name)) is None:  # type: ignore[attr-defined]
                    continue
                self._bind(op)
            self._record(op)
        self.unreferenced_files.extend(files)
        self._version += 1
        return True

    def _bind(self, op: ops.Operation) -> None:
        """Bind an operation on an existing table to the table's id (see Operation)."""
        if isinstance(op, ops.AddTable | ops.AddView | ops.AddSchema | ops.RemoveSchema):
            return
        name = getattr(op, "table", None) or getattr(op, "name", None)
        schema = getattr(op, "schema", None)
        if not isinstance(name, str) or schema is None:
            return

        info = ci_lookup(self._staged.tables, (schema, name))
        if info is not None and info.table_id not in self._staged.created_table_ids:
            op.bound_table_id = info.table_id

    # DDL ----------------------------------------------------------------------------------------------------------
    def create_schema(self, name: str, *, if_not_exists: bool = False) -> None:
        """CREATE SCHEMA. Raises SchemaExistsError."""
        self.stage(ops.AddSchema(name, if_not_exists))

    def drop_schema(self, name: str, *, cascade: bool = False, if_exists: bool = False) -> None:
        """DROP SCHEMA [CASCADE]. Raises NoSuchSchemaError, SchemaExistsError (not empty)."""
        self.stage(ops.RemoveSchema(name, cascade, if_exists))

    def create_table(
        self,
        schema: str,
        name: str,
        columns: Sequence[Column],
        *,
        partition_by: Sequence[tuple[str, str]] | None = None,
        comment: str | None = None,
        replace: bool = False,
        keep_column_ids: bool = False,
    ) -> TableInfo:
        """CREATE [OR REPLACE] TABLE with DuckLake columns (ids are assigned here, unless keep_column_ids: a clone's
        columns carry their source's ids); returns the staged table."""
        from ..types import parse_type

        for col in columns:
            for node in col.walk():
                parse_type(node.type)  # raises UnsupportedTypeError naming the type
        if replace and not self._closed:
            self._unstage_created(schema, name, view=False)  # replacing a table of this transaction: unstage it
        self.stage(ops.AddTable(schema, name, tuple(columns), tuple(partition_by) if partition_by else None,
                                    comment, replace, keep_column_ids))
        return self.table(schema, name)

    def drop_table(self, schema: str, name: str, *, if_exists: bool = False) -> None:
        """DROP TABLE. A table created in this transaction is unstaged as the reference does (nothing of it is
        committed; its staged files are left in `unreferenced_files` for the caller to remove)."""
        if self._closed:
            raise TransactionClosedError("this transaction has already been committed or abandoned")
        if not self._unstage_created(schema, name, view=False):
            self.stage(ops.RemoveTable(schema, name, if_exists))

    def rename_table(self, schema: str, name: str, new_name: str) -> None:
        self.stage(ops.RenameTable(schema, name, new_name))

    def set_partitioning(self, schema: str, name: str, fields: Sequence[tuple[str, str]] | None) -> None:
        """Set (or with None, remove) the partition spec: [(column, transform)], transform identity|year|…|bucket(N)."""
        self.stage(ops.SetPartitioning(schema, name, tuple(fields) if fields else None))

    def set_sorted_by(self, schema: str, name: str, keys: str | Sequence[str] | None) -> None:
        """ALTER TABLE SET SORTED BY (keys: DuckDB sort expressions with ASC/DESC, NULLS FIRST/LAST) or, with None,
        RESET SORTED BY. Raises ValueError: a key that does not parse or names no column of the table."""
        keys = [keys] if isinstance(keys, str) else keys
        self.stage(ops.SetSortedBy(schema, name, tuple(keys) if keys else None))

    def set_layout(self, schema: str, name: str, sorted_by: str | Sequence[str] | None = None,
                   options: Mapping[str, object] | None = None) -> None:
        """A table's sort keys (None: left as they are; '' or []: reset) and table options, each staged only when
        it changes what the table has, so a model that restates its layout on every run adds nothing.

        Raises:
            ValueError: a sort key that does not parse or names no column, or an option DuckDB refuses.
        """
        from .layout import option_text, parse_sorted_by

        info = self.table(schema, name)
        if sorted_by is not None:
            wanted = parse_sorted_by(sorted_by, info) if sorted_by else ()
            if wanted != (info.sort.fields if info.sort else ()):
                self.set_sorted_by(schema, name, sorted_by or None)
        texts = {k: option_text(k, v) for k, v in (options or {}).items()}
        have = {} if info.table_id in self._staged.created_table_ids else self.lake.table_options(info.table_id)
        have.update(self._table_options.get(info.table_id, {}))
        changed = {k: v for k, v in texts.items() if have.get(k) != v}
        if changed:
            self.set_table_options(schema, name, changed)

    def set_table_options(self, schema: str, name: str, options: Mapping[str, object]) -> None:
        """Write options of one table, as DuckDB's set_option(..., table_name => ...) stores them, written with this
        commit (so with the table's final id); this transaction's writes to the table already use them.

        Raises:
            ValueError: an option that is not a write option, or a value DuckDB refuses.
        """
        from .layout import option_text

        texts = {k: option_text(k, v) for k, v in options.items()}
        if texts:
            self.stage(ops.SetTableOptions(schema, name, texts))

    def write_options(self, info: TableInfo) -> WriteOptions:
        """The layout of the table's data files: its options in the lake (read once per transaction: a unit's
        writes follow the options as they were at its first write), with this transaction's on top."""
        from .layout import resolve

        if self._option_rows is None:
            self._option_rows = self.lake.write_option_rows()
        return resolve(self._option_rows, info, self._table_options.get(info.table_id))

    def add_column(self, schema: str, table: str, column: Column) -> None:
        """ADD COLUMN; column.initial_default is what older files read, default_value the DEFAULT."""
        from ..types import parse_type

        for node in column.walk():
            parse_type(node.type)
        self.stage(ops.AddColumn(schema, table, column))

    def drop_column(self, schema: str, table: str, column: str) -> None:
        self.stage(ops.RemoveColumn(schema, table, column))

    def rename_column(self, schema: str, table: str, column: str, new_name: str) -> None:
        self.stage(ops.AlterColumn(schema, table, column, new_name=new_name))

    def alter_column_type(self, schema: str, table: str, column: str, new_type: str) -> None:
        """Widen a column's type (int8→…→int64, uint→wider, float32→float64). Raises SchemaEvolutionError."""
        self.stage(ops.AlterColumn(schema, table, column, new_type=new_type))

    def add_field(self, schema: str, table: str, path: Sequence[str], field: Column) -> None:
        """ALTER TABLE t ADD COLUMN s.f: a new field of the struct at path[:-1] (lists' `element`, maps' `key` and
        `value` on the way), named path[-1], of field's type tree. Raises SchemaEvolutionError."""
        for node in field.walk():
            parse_type(node.type)
        self.stage(ops.ChangeField(schema, table, tuple(path), "add", field=field))

    def drop_field(self, schema: str, table: str, path: Sequence[str]) -> None:
        """ALTER TABLE t DROP COLUMN s.f: a struct field and its children. Raises SchemaEvolutionError."""
        self.stage(ops.ChangeField(schema, table, tuple(path), "drop"))

    def rename_field(self, schema: str, table: str, path: Sequence[str], new_name: str) -> None:
        """ALTER TABLE t RENAME COLUMN s.f TO g: a struct field, same id. Raises SchemaEvolutionError."""
        self.stage(ops.ChangeField(schema, table, tuple(path), "rename", new_name=new_name))

    def evolve_column(self, schema: str, table: str, column: str, target: Column) -> None:
        """ALTER TABLE t ALTER COLUMN s TYPE <nested type>: fields matched by name keep their ids, new ones are added,
        missing ones dropped, leaves widened (target: the new type tree; its ids are ignored). Raises
        SchemaEvolutionError for a change of kind or a narrowing, naming the field."""
        for node in target.walk():
            parse_type(node.type)
        self.stage(ops.ChangeField(schema, table, (column,), "type", field=target))

    def set_column_default(self, schema: str, table: str, column: str, default: str | None) -> None:
        self.stage(ops.AlterColumn(schema, table, column, default=default, set_default=True))

    def set_column_nullable(self, schema: str, table: str, column: str, nullable: bool) -> None:
        self.stage(ops.AlterColumn(schema, table, column, nullable=nullable))

    def set_comment(self, schema: str, name: str, comment: str | None, *, column: str | None = None) -> None:
        """COMMENT ON TABLE/VIEW/COLUMN (None removes it)."""
        self.stage(ops.SetComment(schema, name, comment, column))

    def set_tag(self, schema: str, name: str, key: str, value: str | None) -> None:
        """A tag on a table or view (None removes it); 'comment' is the comment."""
        self.stage(ops.SetTag(schema, name, key, value))

    def create_view(
        self,
        schema: str,
        name: str,
        sql: str,
        *,
        dialect: str = "duckdb",
        column_aliases: Sequence[str] = (),
        replace: bool = False,
        comment: str | None = None,
    ) -> None:
        self.stage(ops.AddView(schema, name, sql, dialect, tuple(column_aliases), replace, comment))

    def drop_view(self, schema: str, name: str, *, if_exists: bool = False) -> None:
        """DROP VIEW. A view created in this transaction is unstaged as the reference does."""
        if self._closed:
            raise TransactionClosedError("this transaction has already been committed or abandoned")
        if not self._unstage_created(schema, name, view=True):
            self.stage(ops.RemoveView(schema, name, if_exists))

    def rename_view(self, schema: str, name: str, new_name: str) -> None:
        self.stage(ops.RenameView(schema, name, new_name))

    # data ---------------------------------------------------------------------------------------------------------
    def add_data_files(self, schema: str, table: str, files: Iterable[DataFileSpec]) -> None:
        """Register written Parquet files as new rows of the table."""
        self.stage(ops.AddDataFiles(schema, table, tuple(files)))

    def delete_rows(self, schema: str, table: str, data_file_id: int, positions: Iterable[int]) -> None:
        """Delete rows of a data file by 0-based position (merge-on-read: a delete file, or the whole file)."""
        # a NumPy array (a MERGE's millions of hits) converts in one call, not one int() per position
        values = positions.tolist() if isinstance(positions, np.ndarray) else [int(p) for p in positions]
        self.stage(ops.DeleteRows(schema, table, data_file_id, tuple(values)))

    def delete_inlined_rows(self, schema: str, table: str, row_ids: Iterable[int]) -> None:
        """Delete rows stored in the table's inlined-data tables, by row id."""
        self.stage(ops.DeleteInlinedRows(schema, table, tuple(int(r) for r in row_ids)))

    def clone_table(self, source_schema: str, source_name: str, schema: str, name: str, *,
                    snapshot: int | None = None, replace: bool = False, link: bool = True) -> str:
        """CREATE [OR REPLACE] TABLE schema.name as a clone of another table of this lake at a snapshot (default:
        this transaction's base): same columns (and column ids), partitioning, comments, tags, row ids and rows.
        The data files are hard links of the source's (see lake/write/clone.py), or copies of their bytes where links are
        impossible or link=False. Returns the kind used: 'hard_link' or 'file_copy'.

        Raises:
            CloneUnsupportedError: the source's files are not on a local file system.
            NoSuchTableError: no such source table at the snapshot.
            TransactionOrderError: the source was changed earlier in this transaction (clone it after the commit).
        """
        if self._touches(source_schema, source_name):
            raise TransactionOrderError(f"{source_schema}.{source_name} was changed earlier in this transaction: clone it after "
                                        "the commit")
        state = self.base if snapshot is None else self.lake.snapshot(snapshot)
        source = state.table(source_schema, source_name)
        op = plan_clone(self.lake, state, source, schema, name)
        partition = None
        if source.partition is not None:
            partition = [(source.column_by_id(f.column_id).name, f.transform) for f in source.partition.fields]
        created = self.create_table(schema, name, source.columns, partition_by=partition, replace=replace,
                                    keep_column_ids=True)
        files = [f.source.path for f in op.files]
        if not link or (files and not probe_links(files[0], self.table_path(created))):
            op.mode = FILE_COPY
        self.stage(op)
        return op.mode

    def _touches(self, schema: str, name: str) -> bool:
        """Whether an operation staged so far creates or changes the table schema.name."""
        for op in self._ops:
            target = getattr(op, "table", None) or getattr(op, "name", None)
            if (isinstance(target, str) and target.lower() == name.lower()
                    and getattr(op, "schema", "").lower() == schema.lower()):
                return True
        return False

    def set_inlining_limit(self, schema: str, table: str, limit: int) -> None:
        """Inline this transaction's inserts into schema.table of at most `limit` rows (0: none), whatever the lake's
        data_inlining_row_limit option says (see lake/write/inlining). Raises ValueError for a negative limit."""
        from .inlined_rows import parse_limit

        self._inlining_limits[(schema.lower(), table.lower())] = parse_limit(limit)

    # commit -------------------------------------------------------------------------------------------------------
    def commit(self) -> Snapshot | None:
        """Write every staged change as one snapshot; None if nothing was staged.

        Raises:
            CommitConflictError: another writer committed a conflicting change (the reference's rules).
            CommitStateUnknownError: the catalog failed while committing; the outcome is unknown.
        """
        if self._closed:
            raise TransactionClosedError("this transaction has already been committed or abandoned")
        self._closed = True
        if not self._ops:
            self._discard_owned()  # written but never staged: nothing can reference them
            return None
        try:
            snapshot, done, token = self._commit()
        except CommitStateUnknownError:
            self._owned = []  # the commit may have happened: its files may be referenced, keep them
            raise
        except BaseException:
            self._discard_owned()  # a definite failure: nothing references them
            raise
        finally:
            if self.committed is not None:
                self._owned = []
        if done is not None:
            remove_inlined_files(done.inlined_rows)  # their rows are in the catalog now; nothing names the files
            # after the files are safe: the lake keeps the state this commit made (the next read loads none)
            self.lake.note_commit(done, snapshot, token)
        return snapshot

    def _commit(self) -> tuple[Snapshot, CatalogBuilder | None, object | None]:
        """The snapshot written, the working catalog of the attempt that wrote it (None when the commit was only
        found in the catalog after its acknowledgement was lost), and the catalog's change token as the commit left
        it (None if unknown)."""
        db = self.lake.db
        self.lake.resolve_unknown_commits()
        # delete files are written before the catalog transaction (the reference's order): this attempt's from the
        # base state, a retry's from what the attempt before it found missing. Kept across attempts; the ones the
        # landing attempt did not use are removed at the end, all of them on a definite failure
        reads: dict[tuple[str, int], DeletePositions] = {}  # delete files read, by (path, begin snapshot)
        written = self._write_deletes_first(db, reads)
        used: set[str] = set()
        try:
            return self._attempts(db, written, reads, used)
        except CommitStateUnknownError:
            _discard([p for p, _, _ in written.values() if p not in used])  # the unknown attempt's stay
            raise
        except BaseException:
            if self.committed is None:
                _discard([p for p, _, _ in written.values()])
            raise
        finally:
            if self.committed is not None:
                _discard([p for p, _, _ in written.values() if p not in used])

    def _write_deletes_first(self, db: CatalogDB, reads: dict[tuple[str, int], DeletePositions]
                             ) -> dict[DeleteFileSpec, tuple[str, int, int]]:
        """The delete files the commit needs as of the base state, written (none without staged deletes)."""
        deletes = [op for op in self._ops if isinstance(op, ops.DeleteRows)]
        if not deletes:
            return {}
        try:
            with db.read() as conn:
                builder = CatalogBuilder(db, conn, self.base)
                builder.read_deletes_cache = reads
                for op in deletes:
                    op.apply(builder)
        except DuckLakeError:
            return {}  # the attempt meets the same failure inside the catalog transaction and reports it there
        written: dict[DeleteFileSpec, tuple[str, int, int]] = {}
        try:
            for spec in builder.unwritten_deletes:
                written.setdefault(spec, spec.write())
        except BaseException:
            _discard([p for p, _, _ in written.values()])
            raise
        return written

    def _attempts(self, db: CatalogDB, written: dict[DeleteFileSpec, tuple[str, int, int]],
                  reads: dict[tuple[str, int], DeletePositions],
                  used: set[str]) -> tuple[Snapshot, CatalogBuilder | None, object | None]:
        for attempt in range(MAX_RETRIES + 1):
            builder: CatalogBuilder | None = None
            backend_pid: int | None = None
            try:
                with db.write() as conn:
                    backend_pid = db.backend_pid(conn)
                    latest_snap = latest_snapshot(db, conn)
                    if latest_snap.snapshot_id != self.base.snapshot_id:
                        mine = self._staged.changes.without_created(self._staged.created_table_ids,
                                                                    self._staged.created_view_ids)
                        check_conflicts(db, conn, self.base.snapshot_id, mine)
                    # nobody committed since the base (the usual case): its state is the latest, no second load
                    latest = (self.base if latest_snap.same_as(self.base.snapshot)
                              else load_state(db, conn, latest_snap, self.lake.data_path))
                    builder = CatalogBuilder(db, conn, latest)
                    builder.inlining_overrides = {**self.lake.inlining_limits, **self._inlining_limits}
                    builder.default_inlining_limit = self.lake.default_inlining_limit
                    builder.written_deletes = written
                    builder.read_deletes_cache = reads
                    for op in self._ops:
                        op.apply(builder)
                    if builder.unwritten_deletes:
                        raise _WriteDeletesFirst
                    for sql, params in builder.finish(self.author, self.commit_message, self.commit_extra_info):
                        db.execute(conn, sql, params)
                # committed: from here on nothing may remove a file, whatever fails
                used.update(builder.written_files)
                self.committed = self._snapshot(builder)
                return self.committed, builder, db.released_token()
            except _WriteDeletesFirst:
                # rolled back, nothing applied: the snapshot moved on since the files were written (or the state
                # did), so write the ones this attempt asked for, outside the catalog transaction, and try again
                assert builder is not None
                for spec in builder.unwritten_deletes:
                    written.setdefault(spec, spec.write())
                if attempt >= MAX_RETRIES:
                    raise CommitConflictError(
                        f"commit failed after {MAX_RETRIES} retries: other writers kept committing first") from None
                logger.info("commit of snapshot %s: delete files written for it, retry %d of %d",
                            builder.snapshot_id, attempt + 1, MAX_RETRIES)
            except CommitStateUnknownError as unknown:
                assert builder is not None
                used.update(builder.written_files)
                tried = self._attempt(builder, backend_pid)
                landed = commit_outcome.outcome(db, tried)
                if landed:
                    logger.info("commit of %s: the acknowledgement was lost but the snapshot is in the catalog",
                                tried.describe())
                    self.committed = self._snapshot(builder)
                    return self.committed, None, None
                used.clear()  # not landed: its delete files may go with the others (unknown: kept, see below)
                if landed is None:
                    used.update(builder.written_files)
                    # keep every file: they may be live; the lake asks again before its next commit
                    self.lake.note_unknown_commit(tried)
                    raise CommitStateUnknownError(
                        f"commit of {tried.describe()}: {unknown}, and the catalog cannot be read to tell whether it "
                        "landed. Its files are kept; this process checks again before its next commit (later, "
                        "ducklake_delete_orphaned_files removes them if it did not land)") from unknown
                _remove(builder)  # provably not applied: a fresh attempt, as after a lost race
                if attempt >= MAX_RETRIES:
                    raise CatalogConnectionError(f"commit of {tried.describe()} failed {MAX_RETRIES + 1} times (the "
                                                 "catalog failed while committing; nothing was applied)") from unknown
                logger.info("commit of %s was not applied (the catalog failed while committing): retrying",
                            tried.describe())
            except sa.exc.DBAPIError as e:
                _remove(builder)
                if not db.dialect.is_conflict(e.orig) or attempt >= MAX_RETRIES:  # type: ignore[arg-type]
                    if db.dialect.is_conflict(e.orig):  # type: ignore[arg-type]
                        raise CommitConflictError(
                            f"commit failed after {MAX_RETRIES} retries: other writers kept committing first"
                        ) from e
                    raise
                wait = RETRY_WAIT_SECONDS * (RETRY_BACKOFF**attempt) * (0.5 + random.random() / 2)
                logger.info("commit lost the race for snapshot %s to another writer; retry %d of %d in %.2fs",
                            builder.snapshot_id if builder is not None else "?", attempt + 1, MAX_RETRIES, wait)
                _sleep(wait)
            except BaseException:
                _remove(builder)  # a definite failure before the COMMIT: nothing was applied
                raise
        raise AssertionError("unreachable")

    def _snapshot(self, builder: CatalogBuilder) -> Snapshot:
        """The snapshot a successful attempt wrote, as the catalog has it (built here: no read that could fail)."""
        return builder.record(self.author, self.commit_message, self.commit_extra_info)

    def _attempt(self, builder: CatalogBuilder, backend_pid: int | None) -> commit_outcome.CommitAttempt:
        files = [f.path for op in self._ops if isinstance(op, ops.AddDataFiles) for f in op.files]
        return commit_outcome.CommitAttempt(builder.snapshot_id, builder.now, builder.changes.render(),
                                            self.commit_message, tuple(files + list(builder.written_files)),
                                            backend_pid)

    def abandon(self) -> None:
        """Discard the staged changes, and the files written for them (none once a commit succeeded or may have)."""
        self._closed = True
        self._discard_owned()


def _adds_to(op: ops.Operation, schema: str, name: str) -> bool:
    return (isinstance(op, ops.AddDataFiles) and op.schema.lower() == schema.lower()
            and op.table.lower() == name.lower())


class _WriteDeletesFirst(Exception):
    """An attempt needs delete files that were not written before its catalog transaction (rolled back)."""


def _remove(builder: CatalogBuilder | None) -> None:
    # only files this attempt wrote inside the catalog transaction (clones' links) and no catalog row references:
    # the attempt definitely failed. Delete files written before it stay for the next attempt (see _commit)
    if builder is not None:
        written = {p for p, _, _ in builder.written_deletes.values()}
        for path in builder.written_files:
            if path not in written:
                file_io(path).delete(path)


def _discard(paths: list[str]) -> None:
    for path in paths:
        file_io(path).delete(path)

