"""Connections: each holds the shared runtime and, inside dbt's BEGIN ... COMMIT, one `LakeWork` (one snapshot)."""

from __future__ import annotations

import json
import re
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from dbt.adapters.contracts.connection import AdapterResponse, Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.sql import SQLConnectionManager
from dbt_common.events.contextvars import get_node_info
from dbt_common.exceptions import DbtDatabaseError, DbtRuntimeError
from pyspark.errors import PySparkException

from . import gc_freeze
from .__version__ import version as adapter_version
from .credentials import DuckLakeCredentials, os_user
from .cursor import DuckLakeCursor
from .invocation import dbt_command
from .lake.catalog.state import LakeState
from .lake.errors import DuckLakeError, MissingDataFileError
from .publish import Build, build_for
from .router import Change, RoutingError
from .runtime import Runtime, SetupError, runtime_for
from .spark.env.session import cancel_tagged
from .spark.read.read_errors import lake_file_error
from .spark.write.work import LakeWork

logger = AdapterLogger("DuckLake")


class DuckLakeHandle:
    """One dbt connection: the shared runtime plus this connection's open unit of work."""

    def __init__(self, runtime: Runtime, creds: DuckLakeCredentials, build: Build | None = None) -> None:
        self.runtime = runtime
        self.creds = creds
        self.build = build  # write-audit-publish: every change goes to the invocation's build, published at its end
        self.work: LakeWork | None = None
        self.in_transaction = False
        self._unit_state: tuple[str, LakeState] | None = None  # (node, what its open transaction reads): read_state
        self._next_unit: tuple[str | None, LakeState] | None = None  # (node, state): see pin_next_unit
        self._operations: list[str] = []
        self.job_tag = f"dbt-ducklake-{uuid.uuid4().hex[:12]}"  # the Spark jobs of this connection's statements
        self.cancelled = False
        self.running = 0  # statements executing now

    def cursor(self) -> DuckLakeCursor:
        return DuckLakeCursor(self)

    def begin(self) -> None:
        if self.in_transaction:
            return
        self.in_transaction = True

    def read_state(self) -> LakeState:
        """The snapshot a statement reads: in a transaction, the one its first statement read (a dbt model's unit of
        work reads one snapshot from its start to its commit, and its commit checks conflicts against it), else the
        latest."""
        node = (get_node_info() or {}).get("unique_id")
        if not self.in_transaction or not node:  # hooks and macros outside a node read the latest
            return self.runtime.names.state()
        if self._unit_state is None or self._unit_state[0] != node:
            pinned, self._next_unit = self._next_unit, None
            state = pinned[1] if pinned is not None and pinned[0] == node else self.runtime.names.state()
            self._unit_state = (node, state)
        return self._unit_state[1]

    def pin_next_unit(self) -> LakeState:
        """The snapshot a node reads before dbt opens its transaction (a Python model's DataFrames are made before
        the BEGIN of the statements that store them): that transaction, of the same node, then reads it too."""
        if self.in_transaction and (get_node_info() or {}).get("unique_id"):
            return self.read_state()
        state = self.runtime.names.state()
        self._next_unit = ((get_node_info() or {}).get("unique_id"), state)
        return state

    def commit(self) -> None:
        work, ops = self.work, self._operations
        self.work, self._operations, self.in_transaction, self._unit_state = None, [], False, None
        if self.build is not None:
            self.build.node_committed((get_node_info() or {}).get("unique_id"))
            return
        if work is not None:
            self._commit(work, ops)

    def rollback(self) -> None:
        work = self.work
        self.work, self._operations, self.in_transaction, self._unit_state = None, [], False, None
        if work is not None:
            work.rollback()

    def run_change(self, stage: Callable[[LakeWork], int], change: Change, base: LakeState | None = None) -> int:
        """Stage a change in the open transaction, or commit it on its own outside one. base: the latest state the
        statement read its names in, the base of a unit of work it starts (no second look at the catalog)."""
        op = f"{change.kind} {change.schema + '.' if change.schema else ''}{change.name or ''}".strip()
        if self.build is not None:
            return self.build.stage(stage, (get_node_info() or {}).get("unique_id"), op)
        if self.in_transaction:
            if self.work is None:
                self.work = LakeWork(self.runtime.spark, self.runtime.lake, base=base)
            result = stage(self.work)
            self._operations.append(op)
            return result
        work = LakeWork(self.runtime.spark, self.runtime.lake, base=base)
        try:
            result = stage(work)
        except BaseException:
            work.rollback()
            raise
        self._commit(work, [op])
        return result

    def _commit(self, work: LakeWork, operations: list[str]) -> None:
        node = get_node_info() or {}
        uid = node.get("unique_id")
        message = f"{uid}: {'; '.join(operations)}" if uid else "; ".join(operations)
        cursors = self.runtime.cursors.stage(work, uid)  # change-feed cursors commit with the model's rows
        # the snapshot the unit read its inputs at: what the model's rows must equal (recomputed from it)
        info = {**provenance(node), "read_snapshot": work.tx.base.snapshot_id}
        work.commit(author=self.creds.author or _user(), commit_message=message, commit_extra_info=json.dumps(info))
        self.runtime.cursors.done(cursors)
        self.runtime.names.invalidate(work.touched)

    def close(self) -> None:
        self.rollback()


# the graph commands, which end in cleanup_connections (where the catalog file's releases are waited for)
DEFERRED_RELEASE_COMMANDS = frozenset({"run", "build", "seed", "snapshot", "test", "retry", "clone"})
# where a Spark error's message ends and its plan or JVM trace begins
_PLAN_LINE = re.compile(r"^\s*('|\+-|:-|== |JVM stacktrace|at [\w$.]+\(|\|)")
MAX_ERROR_LINES = 6


def short_spark_error(text: str) -> str:
    """A Spark error as users need it: its class and message, without the logical plan or JVM stack (those are
    logged at debug level)."""
    out: list[str] = []
    for line in text.strip().splitlines():
        if out and _PLAN_LINE.match(line):
            break
        out.append(line)
    if len(out) > MAX_ERROR_LINES:
        out = out[:MAX_ERROR_LINES] + ["(the full error is in logs/dbt.log at debug level)"]
    hint = _dialect_hint(text)
    return "\n".join(out).rstrip(";") + (f"\n{hint}" if hint else "")


# DuckDB functions a model may reach for, and Spark SQL's way to say them (models run as Spark SQL)
SPARK_EQUIVALENTS = {
    "strftime": "date_format(ts, 'yyyy-MM-dd')", "strptime": "to_timestamp(text, 'yyyy-MM-dd HH:mm:ss')",
    "epoch": "unix_timestamp(ts)", "epoch_ms": "unix_millis(ts)", "date_diff": "datediff(end, start)",
    "datediff": "datediff(end, start)", "list_value": "array(...)", "list_contains": "array_contains(arr, x)",
    "string_agg": "array_join(collect_list(x), ',')", "regexp_matches": "x rlike 'pattern'",
    "struct_pack": "named_struct('a', a, ...)", "len": "length(x) or size(arr)", "today": "current_date()",
    "list_aggregate": "aggregate(arr, ...)", "arg_max": "max_by(x, y)", "arg_min": "min_by(x, y)",
}
_UNRESOLVED = re.compile(r"UNRESOLVED_ROUTINE\][^`]*routine `([^`]+)`", re.S)


_AT_LINE = re.compile(r"\(line (\d+), pos (\d+)\)")
_QUERY_COMMENT = re.compile(r"\A\s*/\*.*?\*/[ \t]*\n", re.S)


def statement_line(text: str, sql: str) -> str:
    """A parse error's "(line N, pos P)" counted in the statement dbt ran, as dbt writes it to target/run (without
    its leading query comment), instead of in the part of it Spark parsed (a materialization's query, its subquery):
    dbt points the user at that file. Unchanged when the parsed text is not found in the statement."""
    m = _AT_LINE.search(text)
    parsed = text.split("== SQL ==", 1)[1] if "== SQL ==" in text else None
    if m is None or parsed is None:
        return text
    # the SQL block: the parsed text, with a caret line under the error's line
    lines = [ln for ln in parsed.strip("\n").splitlines() if not re.fullmatch(r"-*\^+", ln)]
    body = "\n".join(lines).strip()
    comment = _QUERY_COMMENT.match(sql)
    run_text = sql[comment.end():] if comment and "dbt" in comment.group(0) else sql
    at = run_text.find(body) if body else -1
    if at < 0:
        return text
    line = run_text.count("\n", 0, at) + int(m.group(1))
    if line == int(m.group(1)):
        return text
    return text[:m.start()] + f"(line {line}, pos {m.group(2)})" + text[m.end():]


def _dialect_hint(text: str) -> str | None:
    """For a function Spark does not know: that models are Spark SQL, and Spark's way when it is a DuckDB one."""
    m = _UNRESOLVED.search(text)
    if m is None:
        return None
    name = m.group(1).rsplit(".", 1)[-1].lower()
    known = SPARK_EQUIVALENTS.get(name)
    return ("Models run as Spark SQL (Spark's functions, not DuckDB's)"
            + (f": for DuckDB's {name}(), use {known}" if known else "") + ".")


# a JVM stack frame of a Py4J error's text ("\tat org.apache...(File.java:1)", "... 12 more")
_JVM_FRAME = re.compile(r"^\s*(at [\w$.<>/-]+\(.*\)|\.\.\. \d+ more)\s*$")


def short_jvm_error(text: str) -> str:
    """An error that carries a JVM stack (Py4J's, from a call outside PySpark's error conversion) as its messages
    only: the first line and each cause, without the frames and suppressed exceptions (those are logged at debug
    level). Other text is returned as it is."""
    lines = text.strip().splitlines()
    if not any(_JVM_FRAME.match(line) for line in lines):
        return text.strip()
    # "Suppressed:" lines are side stories (each failed attempt of a retried S3 request, the caller's stack trace
    # Spark attaches): the causes say what failed
    out = [line.strip() for line in lines
           if line.strip() and not _JVM_FRAME.match(line) and not line.strip().startswith("Suppressed:")]
    if len(out) > MAX_ERROR_LINES:
        out = out[:MAX_ERROR_LINES] + ["(the full error is in logs/dbt.log at debug level)"]
    return "\n".join(out)


CHECK_HINT = "`dbt run-operation ducklake_check_files` lists every missing or damaged file of the lake"


def missing_file_message(e: MissingDataFileError) -> str:
    """How dbt shows a read refused for a missing or damaged lake file: the class, the table, snapshot and file,
    what to do."""
    return f"{type(e).__name__}: {e}; {CHECK_HINT}"


def read_failure(e: BaseException) -> MissingDataFileError | None:
    """The lake file behind a failed statement: our own check's error, or a Spark read error about a file a read
    noted (spark/read/read_errors.py); None for any other error."""
    if isinstance(e, MissingDataFileError):
        return e
    if isinstance(e, DuckLakeError):
        return None
    return lake_file_error(str(e))


def provenance(node: dict[str, Any]) -> dict[str, Any]:
    from dbt.version import __version__ as dbt_version
    from dbt_common.invocation import get_invocation_id

    return {"invocation_id": get_invocation_id(), "node_unique_id": node.get("unique_id"),
            "dbt_version": dbt_version, "adapter": "dbt-ducklake", "adapter_version": adapter_version}


def commit_author(creds: DuckLakeCredentials) -> str:
    """The author of the snapshots dbt commits: the profile's, else the operating system user."""
    return creds.author or _user()


def _user() -> str:
    return os_user()


class DuckLakeConnectionManager(SQLConnectionManager):
    TYPE = "ducklake"

    @contextmanager
    def exception_handler(self, sql: str) -> Iterator[None]:
        try:
            yield
        except DbtRuntimeError as e:
            self.rollback_if_open()
            redacted = self._redact(str(e))
            if redacted != str(e):
                raise type(e)(redacted) from None
            raise
        except SetupError as e:  # the embedded Spark, started by the first statement that needs it, did not start
            self.rollback_if_open()
            raise DbtRuntimeError(str(e)) from None  # redacted when made
        except Exception as e:  # noqa: BLE001 - a read of a missing or damaged lake file, whatever raised it
            missing = read_failure(e)
            if missing is None:
                self._database_error(sql, e)
            # the statement, the error as raised and its trace (Spark's JVM stack too) stay in the debug log
            logger.debug(self._redact(f"Read of a missing or damaged lake file while running:\n{sql}\n"
                                      f"{''.join(traceback.format_exception(e))}"))
            self.rollback_if_open()
            raise DbtDatabaseError(self._redact(missing_file_message(missing))) from None

    def _database_error(self, sql: str, e: Exception) -> NoReturn:
        """Roll back and raise the DbtDatabaseError of a failed statement (the details at debug level)."""
        if isinstance(e, (DuckLakeError, RoutingError, ValueError)):
            logger.debug(self._redact(f"DuckLake error while running:\n{sql}\n{e}"))
            self.rollback_if_open()
            raise DbtDatabaseError(self._redact(f"{type(e).__name__}: {e}")) from None
        if isinstance(e, PySparkException):
            logger.debug(f"Spark error while running:\n{sql}\n{e}")  # the whole error, plan included
            self.rollback_if_open()
            raise DbtDatabaseError(self._redact(short_spark_error(statement_line(str(e), sql)))) from None
        # e.g. a catalog driver's error, or Py4J's error of a JVM call: still rolled back, still a database error
        logger.debug(self._redact(f"Error while running:\n{sql}\n{e}"))
        self.rollback_if_open()
        raise DbtDatabaseError(self._redact(f"{type(e).__name__}: {short_jvm_error(str(e))}")) from None

    def _redact(self, text: str) -> str:
        creds = self.profile.credentials
        return creds.redact(text) if isinstance(creds, DuckLakeCredentials) else text

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.state == ConnectionState.OPEN:
            return connection
        creds: DuckLakeCredentials = connection.credentials  # type: ignore[assignment]
        try:
            rt = runtime_for(creds)
        except SetupError as e:
            connection.state = ConnectionState.FAIL  # type: ignore[assignment]
            connection.handle = None
            raise DbtRuntimeError(str(e)) from e
        graph = dbt_command() in DEFERRED_RELEASE_COMMANDS
        if rt.lake is not None:
            # a build's commits let go of a DuckDB catalog file in the background; cleanup_connections waits
            rt.lake.db.defer_releases = graph
        if graph:
            gc_freeze.freeze()  # the parsed manifest lives to the command's end: out of full collections until then
        connection.handle = DuckLakeHandle(rt, creds, build_for(rt, creds.write_audit_publish))
        connection.state = ConnectionState.OPEN  # type: ignore[assignment]
        return connection

    @classmethod
    def get_response(cls, cursor: DuckLakeCursor) -> AdapterResponse:
        return AdapterResponse(_message=cursor.message, rows_affected=cursor.rowcount)

    def cancel(self, connection: Connection) -> None:
        """Ctrl-C: stop this connection's running statement (its tagged Spark jobs) and refuse further ones."""
        handle = connection.handle
        if isinstance(handle, DuckLakeHandle):
            handle.cancelled = True
            if handle.build is not None:
                handle.build.cancelled = True  # a cancelled build is never published
            cancel_tagged(handle.runtime.spark, handle.job_tag, lambda: handle.running > 0)

    @classmethod
    def _rollback_handle(cls, connection: Connection) -> None:
        if connection.handle is not None:
            connection.handle.rollback()

    @classmethod
    def _close_handle(cls, connection: Connection) -> None:
        if connection.handle is not None:
            connection.handle.close()

    @classmethod
    def data_type_code_to_name(cls, type_code: str) -> str:  # type: ignore[override]
        return type_code
