"""The small differences between catalog backends (DuckDB file, SQLite, PostgreSQL), in one place."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import TYPE_CHECKING, Any

from ..errors import CatalogValueError
from ..types import duckdb_sql_type

if TYPE_CHECKING:
    from ..records import Column

# The catalog DDL uses DuckDB's type names; other backends store some of them differently, exactly as
# DuckDB's sqlite/postgres metadata managers create them (checked by dumping catalogs DuckDB created).
_SQLITE_TYPES = {"BOOLEAN": "BIGINT", "UUID": "VARCHAR", "TIMESTAMPTZ": "VARCHAR"}


class Dialect:
    """Backend behaviour that differs: DDL type names, parameter and result conversions, conflict detection."""

    name = "duckdb"
    default_schema = "main"

    def ddl(self, statement: str) -> str:
        """Translate one catalog CREATE TABLE written with DuckDB type names."""
        return statement

    # values going in --------------------------------------------------------------------------------------
    def bool_param(self, value: bool | None) -> Any:
        return value

    def uuid_param(self, value: uuid.UUID | str) -> Any:
        return str(value)

    def timestamp_param(self, value: dt.datetime) -> Any:
        return value

    # values coming out ------------------------------------------------------------------------------------
    @staticmethod
    def read_bool(value: Any) -> bool | None:
        return None if value is None else bool(value)

    @staticmethod
    def read_uuid(value: Any) -> str:
        return str(value)

    @staticmethod
    def read_timestamp(value: Any) -> dt.datetime:
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=dt.timezone.utc)
            return value.astimezone(dt.timezone.utc)
        return _parse_text_timestamp(str(value))

    def timestamp_literal_sql(self) -> str:
        """SQL for a bound timestamp parameter compared with snapshot_time."""
        return "CAST(:ts AS TIMESTAMPTZ)"

    def inlined_column_type(self, col: Column) -> str:
        """The column type of an inlined-data table, as the reference's metadata manager declares it."""
        return duckdb_sql_type(col)

    max_identifier_length = 1 << 30

    def is_conflict(self, exc: BaseException) -> bool:
        """Whether a failed commit lost a race (a retry may succeed), judged by exception type, never message."""
        import duckdb

        return isinstance(exc, duckdb.ConstraintException | duckdb.TransactionException)


class SQLiteDialect(Dialect):
    name = "sqlite"
    default_schema = "main"

    def ddl(self, statement: str) -> str:
        def repl(m: re.Match[str]) -> str:
            return _SQLITE_TYPES[m.group(0)]

        return re.sub(r"\b(BOOLEAN|UUID|TIMESTAMPTZ)\b", repl, statement)

    def bool_param(self, value: bool | None) -> Any:
        return None if value is None else int(value)

    def timestamp_param(self, value: dt.datetime) -> Any:
        return format_timestamptz(value)

    def timestamp_literal_sql(self) -> str:
        # stored as DuckDB's text form in UTC, which sorts like the timestamp it spells
        return ":ts"

    def inlined_column_type(self, col: Column) -> str:
        # as DuckDB's sqlite scanner creates them: integers BIGINT, blobs BLOB, everything else text
        if col.type in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "boolean"):
            return "BIGINT"
        return "BLOB" if col.type == "blob" else "VARCHAR"

    def is_conflict(self, exc: BaseException) -> bool:
        import sqlite3

        return isinstance(exc, sqlite3.IntegrityError) or (
            isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", None) in (5, 6)
        )  # SQLITE_BUSY / SQLITE_LOCKED after the busy timeout


_PG_INLINED = {
    "int8": "SMALLINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT", "uint8": "INTEGER",
    "uint16": "INTEGER", "uint32": "BIGINT", "float32": "REAL", "float64": "DOUBLE PRECISION", "boolean": "BOOLEAN",
    "varchar": "BYTEA", "blob": "BYTEA", "json": "BYTEA", "time": "TIME", "timetz": "TIME WITH TIME ZONE",
    "uuid": "UUID", "interval": "INTERVAL",
}


class PostgresDialect(Dialect):
    name = "postgresql"
    default_schema = "public"
    max_identifier_length = 63

    def inlined_column_type(self, col: Column) -> str:
        # as DuckDB's postgres metadata manager declares them (text where PostgreSQL's range or format differs)
        if col.type.startswith("decimal"):
            return "NUMERIC" + col.type[len("decimal"):]
        return _PG_INLINED.get(col.type, "VARCHAR")

    def uuid_param(self, value: uuid.UUID | str) -> Any:
        return uuid.UUID(str(value))

    def is_conflict(self, exc: BaseException) -> bool:
        import psycopg.errors

        return isinstance(
            exc, psycopg.errors.UniqueViolation | psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected
        )


def dialect_for(backend: str) -> Dialect:
    """The dialect of a backend name ('duckdb', 'sqlite', 'postgresql')."""
    return {"duckdb": Dialect, "sqlite": SQLiteDialect, "postgresql": PostgresDialect}[backend]()


def format_timestamptz(value: dt.datetime) -> str:
    """DuckDB's text form of a TIMESTAMPTZ in UTC: '2026-11-21 21:14:32.763154+00' (fraction trimmed)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    value = value.astimezone(dt.timezone.utc)
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text + "+00"


_TS_RE = re.compile(r"^(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:([+-])(\d\d)(?::?(\d\d))?)?$")


def _parse_text_timestamp(text: str) -> dt.datetime:
    m = _TS_RE.match(text.strip())
    if not m:
        raise CatalogValueError(f"cannot parse catalog timestamp {text!r}")
    y, mo, d, h, mi, s, frac, sign, th, tm = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    tz = dt.timezone.utc
    if sign:
        off = dt.timedelta(hours=int(th), minutes=int(tm or 0))
        tz = dt.timezone(off if sign == "+" else -off)
    value = dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), micro, tzinfo=tz)
    return value.astimezone(dt.timezone.utc)
