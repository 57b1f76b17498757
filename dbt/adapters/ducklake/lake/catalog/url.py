"""Catalog locations: user input -> SQLAlchemy URL, and the DuckDB `ATTACH 'ducklake:…'` string for the same lake."""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from ..errors import CatalogConnectionError

BACKENDS = ("duckdb", "sqlite", "postgresql")


@dataclass(frozen=True)
class CatalogLocation:
    """Where a lake's catalog lives: backend name plus the SQLAlchemy URL that reaches it."""

    backend: str  # one of BACKENDS
    url: URL

    @property
    def file_path(self) -> str | None:
        """The database file for file backends (DuckDB, SQLite)."""
        return self.url.database if self.backend in ("duckdb", "sqlite") else None

    def duckdb_attach_target(self) -> str:
        """What DuckDB's ducklake extension attaches: 'ducklake:<path>', 'ducklake:sqlite:<path>', 'ducklake:postgres:…'."""
        if self.backend == "duckdb":
            return f"ducklake:{self.url.database}"
        if self.backend == "sqlite":
            return f"ducklake:sqlite:{self.url.database}"
        parts = []
        u = self.url
        if u.host:
            parts.append(f"host={u.host}")
        if u.port:
            parts.append(f"port={u.port}")
        if u.username:
            parts.append(f"user={u.username}")
        if u.password:
            parts.append(f"password={u.password}")
        if u.database:
            parts.append(f"dbname={u.database}")
        return "ducklake:postgres:" + " ".join(parts)

    def render(self) -> str:
        """The URL with any password hidden, for messages."""
        return self.url.render_as_string(hide_password=True)


def parse_catalog(value: str) -> CatalogLocation:
    """Turn a profile's `catalog` value into a location.

    Accepted: a SQLAlchemy URL (duckdb:///…, sqlite:///…, postgresql[+driver]://…), DuckDB's own forms
    ('ducklake:path', 'ducklake:sqlite:path', 'ducklake:postgres:key=value …'), or a bare file path (a DuckDB file).

    Raises:
        CatalogConnectionError: the value names no supported catalog.
    """
    if not value or not value.strip():
        raise CatalogConnectionError("catalog location is empty: give a file path or a SQLAlchemy URL")
    value = value.strip()
    if value.startswith("ducklake:"):
        return _from_duckdb_form(value[len("ducklake:") :])
    if "://" not in value:
        return CatalogLocation("duckdb", URL.create("duckdb", database=_abs(value)))
    try:
        url = make_url(value)
    except ArgumentError as e:
        raise CatalogConnectionError(f"catalog URL {value!r} is not a valid SQLAlchemy URL: {e}") from e
    backend = url.get_backend_name()
    if backend == "postgres":
        backend = "postgresql"
    if backend not in BACKENDS:
        raise CatalogConnectionError(
            f"catalog URL {url.render_as_string(hide_password=True)!r} uses backend {backend!r}; "
            f"supported catalog backends are {', '.join(BACKENDS)}"
        )
    if backend == "postgresql":
        if url.get_driver_name() in ("psycopg2", "pg8000", "asyncpg") or "+" not in url.drivername:
            url = url.set(drivername="postgresql+psycopg")
        return CatalogLocation(backend, url)
    if not url.database or url.database == ":memory:":
        raise CatalogConnectionError(f"catalog URL {value!r} names no database file; an in-memory catalog cannot hold a lake")
    return CatalogLocation(backend, url.set(database=_abs(url.database)))


def _abs(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _from_duckdb_form(rest: str) -> CatalogLocation:
    if rest.startswith("sqlite:"):
        return CatalogLocation("sqlite", URL.create("sqlite", database=_abs(rest[len("sqlite:") :])))
    if rest.startswith(("postgres:", "postgresql:")):
        kv = dict(part.split("=", 1) for part in rest.split(":", 1)[1].split() if "=" in part)
        url = URL.create(
            "postgresql+psycopg",
            username=kv.get("user"),
            password=kv.get("password"),
            host=kv.get("host"),
            port=int(kv["port"]) if "port" in kv else None,
            database=kv.get("dbname") or kv.get("database"),
        )
        return CatalogLocation("postgresql", url)
    if rest.startswith("duckdb:"):
        rest = rest[len("duckdb:") :]
    return CatalogLocation("duckdb", URL.create("duckdb", database=_abs(rest)))
