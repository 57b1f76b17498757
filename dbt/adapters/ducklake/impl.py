"""The adapter: metadata from the DuckLake catalog (never from Spark's), SQL behaviour from dbt-spark's macros."""

from __future__ import annotations

import datetime
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from dbt.adapters.base import AdapterConfig, ConstraintSupport, available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.capability import Capability, CapabilityDict, CapabilitySupport, Support
from dbt.adapters.contracts.relation import RelationType
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.column import SparkColumn
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.contracts.constraints import ConstraintType
from dbt_common.events.contextvars import get_node_info
from dbt_common.exceptions import DbtDatabaseError, DbtRuntimeError
from pyspark.errors import AnalysisException

from . import gc_freeze, python_models, time_travel
from .apply import partition_fields
from .change_feed import CHANGE_TYPE_COLUMN, ChangeFeedError, changes_query, replay_query
from .connections import DuckLakeConnectionManager, DuckLakeHandle, missing_file_message
from .credentials import DuckLakeCredentials
from .lake.catalog.lookups import ci_lookup
from .lake.catalog.state import LakeState
from .lake.errors import MissingDataFileError
from .lake.read.scan import row_count
from .relation import DuckLakeRelation
from .runtime import SetupError
from .spark.answer.pruned_frames import prunable
from .spark.env.session import is_started, session_of
from .spark.read.names import table_refs
from .spark.types import added_fields, to_spark
from .spark.write.work import LakeWork

_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class DuckLakeConfig(AdapterConfig):
    partition_by: list[str] | str | None = None
    incremental_strategy: str | None = None
    unique_key: list[str] | str | None = None


logger = AdapterLogger("DuckLake")


def _existing_ancestor(path: str) -> str:
    """The path, or its nearest existing parent (where a new data folder would be made)."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _can_write_in(directory: str) -> bool:
    """Whether a folder can be made in directory (probed with one that is removed at once: nothing stays)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ducklake-probe-", dir=directory))
        return True
    except OSError:
        return False


def _type_text(col: Any) -> str:
    try:
        return to_spark(col).simpleString()
    except Exception:  # noqa: BLE001 - a type Spark cannot hold is shown by its DuckLake name
        return str(col.type)


_MISSING_RELATION = {"TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND"}
_GRANTS_WARNED: set[str] = set()  # invocation ids whose run was told that grants are ignored
_GRANTS_LOCK = threading.Lock()


class DuckLakeAdapter(SparkAdapter):
    Relation = DuckLakeRelation  # type: ignore[assignment]
    ConnectionManager = DuckLakeConnectionManager  # type: ignore[assignment]
    AdapterSpecificConfigs = DuckLakeConfig  # type: ignore[assignment]

    # NOT NULL is a DuckLake column property that the writers check; the others are metadata DuckLake does not keep
    CONSTRAINT_SUPPORT = {  # noqa: RUF012 - dbt reads this class attribute
        ConstraintType.not_null: ConstraintSupport.ENFORCED,
        ConstraintType.check: ConstraintSupport.NOT_SUPPORTED,
        ConstraintType.unique: ConstraintSupport.NOT_ENFORCED,
        ConstraintType.primary_key: ConstraintSupport.NOT_ENFORCED,
        ConstraintType.foreign_key: ConstraintSupport.NOT_ENFORCED,
    }

    _capabilities = CapabilityDict({
        Capability.TableLastModifiedMetadata: CapabilitySupport(support=Support.Full),
    })

    def __init__(self, config: object, mp_context: object) -> None:
        super().__init__(config, mp_context)  # type: ignore[arg-type]
        from .runtime import prestart

        creds = getattr(config, "credentials", None)
        if isinstance(creds, DuckLakeCredentials):
            prestart(creds)  # the JVM starts while dbt parses the project

    @classmethod
    def type(cls) -> str:
        return "ducklake"

    @classmethod
    def quote(cls, identifier: str) -> str:  # type: ignore[override]
        # a classmethod: dbt renders contract column lists from a classmethod (render_raw_columns_constraints)
        return f"`{identifier}`"  # as dbt-spark (which also quotes None, for the test utilities)

    @classmethod
    def convert_datetime_type(cls, agate_table: Any, col_idx: int) -> str:
        """A seed column of date-times: `timestamp_ntz` (DuckLake TIMESTAMP) when no value carries a zone or offset,
        as DuckDB's and dbt-duckdb's CSV readers make it (the CSV's wall time, read the same under any TimeZone);
        Spark's `timestamp` (an instant, DuckLake TIMESTAMPTZ) when any value does (agate keeps the offset)."""
        zoned = any(v is not None and v.tzinfo is not None for v in agate_table.columns[col_idx].values())
        return "timestamp" if zoned else "timestamp_ntz"

    # access to the lake ---------------------------------------------------------------------------------------
    def _handle(self) -> DuckLakeHandle:
        conn = self.connections.get_thread_connection()
        if conn.handle is None or not hasattr(conn.handle, "runtime"):
            conn = self.connections.open(conn)
        return conn.handle  # type: ignore[return-value]

    def _state(self) -> LakeState:
        return self._handle().runtime.names.state()

    # metadata -------------------------------------------------------------------------------------------------
    def list_schemas(self, database: str) -> list[str]:
        return sorted(s for s in self._state().schemas)

    def check_schema_exists(self, database: str, schema: str) -> bool:
        return ci_lookup(self._state().schemas, schema) is not None

    def list_relations_without_caching(self, schema_relation: BaseRelation) -> list[BaseRelation]:  # type: ignore[override]
        st = self._state()
        schema = schema_relation.schema or ""
        out: list[BaseRelation] = []
        for (s, name), _t in st.tables.items():
            if s.lower() == schema.lower():
                out.append(self.Relation.create(schema=s, identifier=name, type=RelationType.Table))
        for (s, name), _v in st.views.items():
            if s.lower() == schema.lower():
                out.append(self.Relation.create(schema=s, identifier=name, type=RelationType.View))
        return out

    def cleanup_connections(self) -> None:
        """The end of a run: a write-audit-publish build is published (or abandoned) before the connections go."""
        from .connections import commit_author, provenance
        from .runtime import existing_runtime

        creds = self.config.credentials
        rt = existing_runtime(creds) if isinstance(creds, DuckLakeCredentials) else None
        build = rt.build if rt is not None else None
        try:
            if build is not None and not build.finished:
                build.finish(commit_author(creds), provenance({}))
        finally:
            try:
                if rt is not None and rt.lake is not None:
                    rt.lake.db.settle()  # the catalog file let go before dbt returns (DuckDB users may open it next)
                super().cleanup_connections()
            finally:
                gc_freeze.thaw()

    def get_columns_in_relation(self, relation: BaseRelation) -> list[SparkColumn]:  # type: ignore[override]
        st = self._state()
        if relation.schema:
            build = self._handle().build
            staged = build.staged_table(relation.schema, relation.identifier or "") if build is not None else None
            table = staged or ci_lookup(st.tables, (relation.schema, relation.identifier))
            if table is not None:
                return [SparkColumn(table_database=None, table_schema=relation.schema, table_name=relation.name,
                                    table_type="table", table_owner="", table_stats=None, column=c.name,
                                    column_index=i, dtype=to_spark(c).simpleString())
                        for i, c in enumerate(table.columns)]
        # views and Spark-only relations (temporary views): ask Spark for the shape
        spark = self._handle().runtime.spark
        name = relation.render()
        if relation.schema:
            self._handle().runtime.names.refresh([(relation.schema.lower(), (relation.identifier or "").lower())])
        try:
            fields = spark.table(name).schema.fields
        except AnalysisException as e:
            if e.getCondition() in _MISSING_RELATION:
                return []  # a missing relation has no columns, as in other adapters
            raise  # a view that no longer analyses (e.g. a column it reads was dropped) is an error, not "no columns"
        return [SparkColumn(table_database=None, table_schema=relation.schema, table_name=relation.name,
                            table_type="view", table_owner="", table_stats=None, column=f.name, column_index=i,
                            dtype=f.dataType.simpleString()) for i, f in enumerate(fields)]

    def _get_one_catalog(self, information_schema: Any, schemas: set[str], used_schemas: Any) -> Any:  # type: ignore[override]
        import agate
        from dbt_common.clients.agate_helper import DEFAULT_TYPE_TESTER

        st = self._state()
        rows: list[dict[str, Any]] = []
        for schema in schemas:
            for (s, name), t in st.tables.items():
                if s.lower() != schema.lower():
                    continue
                stats = st.table_stats(t)
                rows_now = row_count(st, t) if stats is not None else None
                col_tags = t.column_tags
                for i, c in enumerate(t.columns, 1):  # catalog indexes are 1-based, as dbt's other adapters give
                    rows.append(self._catalog_row(s, name, "table", t.comment, c.name, i, _type_text(c),
                                                  col_tags.get(c.column_id, {}).get("comment"), stats, rows_now))
            for (s, name), v in st.views.items():
                if s.lower() != schema.lower():
                    continue
                for col in self.get_columns_in_relation(self.Relation.create(schema=s, identifier=name)):
                    rows.append(self._catalog_row(s, name, "view", v.comment, col.column, (col.column_index or 0) + 1,
                                                  col.dtype, None, None, None))
        return agate.Table.from_object(rows, column_types=DEFAULT_TYPE_TESTER)

    @staticmethod
    def _catalog_row(schema: str, name: str, kind: str, comment: str | None, column: str, index: int, dtype: str,
                     column_comment: str | None, stats: Any, rows_now: int | None) -> dict[str, Any]:
        row: dict[str, Any] = {
            "table_database": None, "table_schema": schema, "table_name": name, "table_type": kind,
            "table_comment": comment, "table_owner": None, "column_name": column, "column_index": index,
            "column_type": dtype, "column_comment": column_comment,
        }
        if stats is not None:
            row.update({
                "stats:rows:label": "Row count", "stats:rows:value": rows_now,
                "stats:rows:description": "Rows of the table now, from the DuckLake catalog (files' record counts "
                                          "minus deleted rows, plus inlined rows)",
                "stats:rows:include": True,
                "stats:bytes:label": "Size", "stats:bytes:value": stats.file_size_bytes,
                "stats:bytes:description": "Bytes of the table's data files, from DuckLake stats",
                "stats:bytes:include": True,
            })
        return row

    @available
    def load_seed(self, relation: BaseRelation, agate_table: Any, column_override: dict[str, str] | None,
                  quote_columns: bool | None = None, layout: dict[str, Any] | None = None) -> int:
        """CREATE OR REPLACE the seed's table with its rows, staged in the model's transaction; returns the rows.
        layout: the seed's `sorted_by` (a string or a list of keys) and write options (`parquet_*`,
        `target_file_size`), as a model's (docs/guide/table-layout.md)."""
        from .seeds import Seed, is_inline, seed_arrow, seed_dataframe

        overrides = {k.lower(): v for k, v in (column_override or {}).items()}
        names = list(agate_table.column_names)
        if quote_columns is False:  # unquoted names must be plain identifiers, as in the SQL a seed would run
            bad = [n for n in names if not _PLAIN_NAME.match(n)]
            if bad:
                raise DbtDatabaseError(f"syntax error: seed column names {bad} are not plain identifiers and "
                                       "quote_columns is false (quote them, or check the CSV delimiter)")
        types = [overrides.get(n.lower()) or self.convert_type(agate_table, i) for i, n in enumerate(names)]
        conn = self.connections.get_thread_connection()
        if not conn.transaction_open:
            self.connections.begin()
        h = self._handle()
        rows = [tuple(r) for r in agate_table.rows]
        schema, name = relation.schema or "", relation.identifier or ""
        options = {k: str(v) for k, v in (layout or {}).items() if k != "sorted_by" and v is not None}
        keys = (layout or {}).get("sorted_by")
        sorted_by = ", ".join(keys) if isinstance(keys, (list, tuple)) else keys
        # the values computed on the driver where no Spark cast is needed: such a seed needs no JVM
        driver = seed_arrow(names, rows, types, timestamp_ntz=self._timestamp_ntz(h))
        if driver is not None:
            def stage(work: LakeWork) -> int:
                work.create_table_from_arrow(schema, name, *driver, replace=True, sorted_by=sorted_by,
                                             table_options=options)
                return 0
        else:
            df = seed_dataframe(h.runtime.spark, names, rows, types)
            bounded = is_inline(names, rows)

            def stage(work: LakeWork) -> int:
                work.create_table_as(schema, name, df, replace=True, bounded=bounded, sorted_by=sorted_by,
                                     table_options=options)
                return 0
        h.run_change(stage, Seed(schema=schema, name=name))
        return len(agate_table.rows)

    @staticmethod
    def _timestamp_ntz(h: DuckLakeHandle) -> bool:
        """Whether Spark's `timestamp` is TIMESTAMP_NTZ here (the session's setting; before Spark starts, no SET can
        have changed the profile's)."""
        spark = h.runtime.spark
        if is_started(spark):
            value = spark.conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ")
        else:
            value = h.creds.spark_config.get("spark.sql.timestampType", "TIMESTAMP_LTZ")
        return str(value).upper() == "TIMESTAMP_NTZ"

    @available
    def listagg_sql(self, measure: str, delimiter_text: str, order_by_clause: str | None,
                    limit_num: int | None) -> str:
        """listagg in Spark SQL, honouring ORDER BY (and a limit, by sorting the collected values)."""
        from .sql_snippets import listagg

        return listagg(measure, delimiter_text, order_by_clause, limit_num)

    @available
    def last_changed(self, relation: BaseRelation) -> Any:
        """When the last snapshot that changed the relation was committed (source freshness without a column)."""
        from .spark.answer.freshness import last_change_time

        return last_change_time(self._handle().runtime.lake, relation.schema or "", relation.identifier or "")

    def debug_query(self) -> None:
        h = self._handle()
        rt = h.runtime
        try:
            rt.spark.sql("select 1").collect()
        except SetupError as e:  # the embedded session did not start (it starts on first use)
            raise DbtRuntimeError(str(e)) from e
        except Exception as e:  # noqa: BLE001
            raise DbtRuntimeError(f"Spark ({h.creds.master}) does not run queries: {e}") from e
        if rt.server is not None:
            logger.info(f"Spark: {rt.server.describe()}")
        if h.creds.object_store() is not None:
            _check_s3_connector(rt.spark, h.creds)
        path = h.creds.data_path
        if "://" not in path and not _can_write_in(_existing_ancestor(path)):
            raise DbtRuntimeError(f"the data path {path!r} does not work: it is not a writable folder, and none can be "
                                  "made there")
        if rt.lake is None:
            logger.info(f"the catalog {h.creds.catalog_display} holds no DuckLake yet: the first writing command "
                        f"(dbt run, seed, build) creates it, with its Parquet files in {h.creds.data_path}")
            return
        try:
            rt.lake.snapshot()
        except Exception as e:  # noqa: BLE001
            raise DbtRuntimeError(h.creds.redact(f"the catalog {h.creds.catalog_display!r} cannot be read: {e}")) from None

    @available
    def grants_warning_due(self) -> bool:
        """True the first time in a dbt invocation: `grants` is said to be ignored once per run."""
        from dbt_common.invocation import get_invocation_id

        with _GRANTS_LOCK:
            invocation = get_invocation_id()
            if invocation in _GRANTS_WARNED:
                return False
            _GRANTS_WARNED.add(invocation)
            return True

    @available
    def valid_incremental_strategies(self) -> list[str]:
        return ["append", "merge", "delete+insert", "insert_overwrite", "microbatch", "replace_where"]

    @available
    def change_type_column(self) -> str:
        """The column ducklake_changes() adds to an upstream's rows: insert | update_postimage | delete."""
        return CHANGE_TYPE_COLUMN

    @available
    def ducklake_changes_sql(self, upstream: BaseRelation, target: BaseRelation, incremental: bool,
                             unique_key: Any = None) -> str:
        """The Spark SQL of ducklake_changes(): an upstream's rows changed since the model last consumed it."""
        if not upstream.schema or not upstream.identifier:
            raise DbtRuntimeError(f"ducklake_changes() needs a DuckLake table (a ref or source), got {upstream}")
        keys = [unique_key] if isinstance(unique_key, str) else list(unique_key or [])
        h = self._handle()
        rt = h.runtime
        node = (get_node_info() or {}).get("unique_id")
        try:
            return changes_query(rt.spark, rt.lake, rt.cursors, (upstream.schema.lower(), upstream.identifier.lower()),
                                 ((target.schema or "").lower(), (target.identifier or "").lower()), node,
                                 bool(incremental), [k for k in keys if k], h.pin_next_unit())
        except ChangeFeedError as e:
            raise DbtRuntimeError(str(e)) from e
        except MissingDataFileError as e:
            raise DbtRuntimeError(missing_file_message(e)) from None

    @available
    def ducklake_replay_sql(self, upstream: BaseRelation, target: BaseRelation, target_exists: bool) -> str:
        """The Spark SQL of ducklake_changes() in a snapshot with strategy 'ducklake': every change since the
        snapshot's cursor, with its DuckLake snapshot and commit time."""
        if not upstream.schema or not upstream.identifier:
            raise DbtRuntimeError(f"ducklake_changes() needs a DuckLake table (a ref or source), got {upstream}")
        h = self._handle()
        rt = h.runtime
        node = (get_node_info() or {}).get("unique_id")
        try:
            return replay_query(rt.spark, rt.lake, rt.cursors, (upstream.schema.lower(), upstream.identifier.lower()),
                                ((target.schema or "").lower(), (target.identifier or "").lower()), node,
                                bool(target_exists), h.pin_next_unit())
        except ChangeFeedError as e:
            raise DbtRuntimeError(str(e)) from e
        except MissingDataFileError as e:
            raise DbtRuntimeError(missing_file_message(e)) from None

    @available
    def ducklake_at(self, relation: BaseRelation, version: Any = None, timestamp: Any = None,
                    changes_back: Any = None) -> str | None:
        """The Spark name of a DuckLake table as of a snapshot version, a time, or N changes back (None when the
        table has no such earlier version: it is younger than that)."""
        if not relation.schema or not relation.identifier:
            raise DbtRuntimeError(f"time travel needs a DuckLake table (a ref or source), got {relation}")
        rt = self._handle().runtime
        try:
            snap = time_travel.resolve(rt.lake, relation.schema, relation.identifier, version, timestamp, changes_back)
            if snap is None:
                return None
            return time_travel.relation_at(rt.spark, rt.lake, relation.schema, relation.identifier, snap)
        except (time_travel.TimeTravelError, ValueError) as e:
            raise DbtRuntimeError(str(e)) from e
        except MissingDataFileError as e:
            raise DbtRuntimeError(missing_file_message(e)) from None

    @available
    def ducklake_python_model(self, model: dict[str, Any], compiled_code: str) -> str:
        """Run a Python model in the adapter's SparkSession; returns the temporary view that holds its rows (the
        materialization builds the table from it as from SQL). Nothing is staged before the model returns."""
        h = self._handle()
        rt = h.runtime
        name = model.get("alias") or model.get("name") or "model"
        try:
            python_models.check_packages(name, model.get("config", {}).get("packages"))
        except python_models.PythonModelError as e:
            raise DbtRuntimeError(str(e)) from e
        filename = os.path.join(self.config.project_root, model.get("original_file_path") or f"{name}.py")

        state = h.pin_next_unit()  # every dbt.ref() and dbt.source() of the model reads this snapshot

        def load(rel: python_models.Relation) -> Any:
            key = (rel.schema.lower(), rel.identifier.lower())
            name = f"{self.quote(rel.schema)}.{self.quote(rel.identifier)}"
            if rt.names.reads_staged([key]):
                rt.names.refresh([key], h.creds.schema)
                return rt.spark.table(name)  # a build's staged table: the catalog's stats do not know its files
            with rt.names.bound([key], state) as relations:  # the DataFrame is analysed here (classic)
                if key in relations:
                    df = rt.spark.sql(f"SELECT * FROM {relations[key]}")
                else:
                    rt.names.refresh([key], h.creds.schema, state)
                    df = rt.spark.table(name)
            # filters on it skip files by catalog statistics, as a SQL model's WHERE does
            return prunable(df, name, lambda: state, lambda sql: rt.names.readable(sql, h.creds.schema, state))

        def relation(rel: python_models.Relation) -> BaseRelation:
            return self.Relation.create(schema=rel.schema, identifier=rel.identifier, type=RelationType.Table)

        def at(rel: python_models.Relation, kw: dict[str, Any]) -> Any:
            unknown = set(kw) - {"version", "timestamp", "changes_back"}
            if unknown:
                raise python_models.PythonModelError(
                    f"ducklake_at() takes version=, timestamp= or changes_back=, not {sorted(unknown)}")
            spark_name = self.ducklake_at(relation(rel), kw.get("version"), kw.get("timestamp"),
                                          kw.get("changes_back"))
            if spark_name is None:
                raise python_models.PythonModelError(
                    f"{rel.schema}.{rel.identifier} has no version {kw.get('changes_back')} changes back")
            return rt.spark.table(spark_name)

        def changes(rel: python_models.Relation, incremental: bool) -> Any:
            this = self.Relation.create(schema=model.get("schema"), identifier=name)
            key = model.get("config", {}).get("unique_key")
            return rt.spark.sql(self.ducklake_changes_sql(relation(rel), this, incremental, key))

        # dbt.this may be read with spark.sql / spark.table (as in dbt-spark): make the lake name resolve
        rt.names.refresh([((model.get("schema") or h.creds.schema).lower(), name.lower())], h.creds.schema)
        try:
            # the model's code gets the SparkSession itself (not the lazy stand-in: isinstance checks, PySpark APIs)
            df = python_models.run_model(session_of(rt.spark), compiled_code, model_name=name, filename=filename, load=load,
                                         at=at, changes=changes)
        except python_models.PythonModelError as e:
            if isinstance(e.__cause__, MissingDataFileError):  # a ref or source it read: no traceback needed
                raise DbtRuntimeError(missing_file_message(e.__cause__)) from None
            raise DbtRuntimeError(str(e)) from None  # the model's own traceback is in the message
        view = python_models.temp_view_name(model.get("unique_id") or name)
        df.createOrReplaceTempView(view)
        return view

    @available
    def change_feed_needs_rebuild(self, target: BaseRelation) -> bool:
        """Whether a ducklake_changes() of this model found no usable cursor on an incremental run (an upstream
        replaced, or its consumed snapshot expired): the model is then rebuilt from the upstream's current rows."""
        return self._handle().runtime.cursors.needs_rebuild(((target.schema or "").lower(),
                                                             (target.identifier or "").lower()))

    @available
    def query_columns(self, sql: str) -> list[str]:
        """The column names of a Spark query (analysed, not run), after the lake names it reads are made current."""
        rt = self._handle().runtime
        rt.names.refresh(table_refs(sql))
        return list(rt.spark.sql(sql).columns)

    @available
    def nested_fields_added(self, relation: BaseRelation, column: str, new_type: str) -> list[str]:
        """The `path type` entries of ALTER TABLE ... ADD COLUMNS for the struct fields that the model's type of a
        nested column has and the table's lacks (on_schema_change append_new_columns: fields are added, never
        dropped or changed)."""
        current = next((c for c in self.get_columns_in_relation(relation) if c.name.lower() == column.lower()), None)
        if current is None:
            return []
        spark = self._handle().runtime.spark
        old, new = (spark.createDataFrame([], f"x {t}").schema.fields[0].dataType for t in (current.dtype, new_type))
        return [".".join(self.quote(p) for p in path) + " " + dtype.simpleString()
                for path, dtype in added_fields(old, new, (current.name,))]

    @available
    def partition_source_columns(self, partition_by: list[str]) -> list[str]:
        """The columns partition_by entries are computed from (`day(ts)` -> ts): an INSERT OVERWRITE ... PARTITION
        list that marks dynamic partition replacement."""
        return [self.quote(name) for name, _transform in partition_fields(list(partition_by))]

    @available
    def timestamp_literal(self, value: Any) -> str:
        """A Spark TIMESTAMP literal for a datetime, in UTC (the session time zone)."""
        if getattr(value, "tzinfo", None) is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S.%f')}'"

    # maintenance (run-operations in macros/maintenance.sql) ----------------------------------------------------
    @available
    def ducklake_maintenance(self, operation: str, **kwargs: Any) -> str:
        """Run a lake maintenance operation (expire_snapshots, cleanup_old_files, delete_orphaned_files,
        merge_adjacent_files, rewrite_data_files, flush_inlined_data, checkpoint) with DuckDB's semantics, or
        check_files; returns a one-line summary."""
        from .maintenance import run

        if self._handle().build is not None and operation != "check_files":  # a check commits nothing
            raise DbtRuntimeError(f"ducklake {operation}: lake maintenance commits snapshots of its own, which a "
                                  "write-audit-publish build cannot hold back: run it with `dbt run-operation` after "
                                  "the build")
        work = self._handle().work
        if work is not None and not work.is_empty and operation != "check_files":
            raise DbtRuntimeError(f"ducklake {operation}: this connection holds a model's changes not yet committed, "
                                  "which the maintenance would race with its own snapshots: run it after the commit "
                                  "(as a post-hook: {'sql': '{{ ducklake_" + operation + "() }}', 'transaction': "
                                  "false})")
        return run(self._handle().runtime, operation, **kwargs)

    @available
    def ducklake_inlining_limit(self, relation: BaseRelation, limit: Any) -> str:
        """A model's `data_inlining_row_limit` config: its inserts of at most that many rows are committed as
        inlined rows, and the limit is stored as the table's option (lake/write/inlining)."""
        try:
            self._handle().runtime.lake.set_inlining_limit(relation.schema or "", relation.identifier or "", limit)
        except ValueError as e:
            raise DbtRuntimeError(f"model {relation}: {e}") from None
        return ""

    @available
    def ducklake_write_audit_publish(self) -> bool:
        """Whether this invocation stages everything for one publish at its end (write_audit_publish)."""
        return self._handle().build is not None


def _check_s3_connector(spark: Any, creds: DuckLakeCredentials) -> None:
    """Raise, saying what to add, when the running driver cannot load Hadoop's s3a file system (a data path on S3
    would fail at its first write otherwise, with a ClassNotFoundException deep in a Spark stack trace)."""
    from .spark.env import s3a
    from .spark.env.session import is_classic, session_of

    session = session_of(spark)
    if not is_classic(session):  # a Spark Connect server: its own class path, not visible from here
        return
    try:
        jsc = session.sparkContext._jsc
        session._jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass("s3a", jsc.hadoopConfiguration())  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - Py4J wraps the ClassNotFoundException / UnsupportedFileSystemException
        said = s3a.connector_status({str(k): str(v) for k, v in creds.spark_config.items()})[1]
        raise DbtRuntimeError(f"Spark cannot reach the data path {creds.data_path!r}: no {s3a.S3A_CLASS} on the "
                              f"driver's class path. Run scripts/setup.sh (caches {s3a.HADOOP_AWS} and "
                              f"{s3a.AWS_SDK_BUNDLE} in {s3a.jars_dir()}), or add {s3a.PACKAGES_HINT} to the profile"
                              f"{'' if 'MISSING' in said else f' (found: {said})'}") from None
