"""The reference implementation (DuckDB 1.5 + its ducklake extension, loaded by path) for conformance tests."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import duckdb

from dbt.adapters.ducklake.lake.catalog.url import CatalogLocation, parse_catalog

_EXTENSIONS = {
    "ducklake": "duckdb_extension_ducklake",
    "sqlite_scanner": "duckdb_extension_sqlite_scanner",
    "postgres_scanner": "duckdb_extension_postgres_scanner",
}


def extension_path(name: str) -> str:
    """Path of an extension shipped in a duckdb-extension-* wheel."""
    mod = __import__(_EXTENSIONS[name])
    return os.path.join(os.path.dirname(mod.__file__), "extensions", f"v{duckdb.__version__}", f"{name}.duckdb_extension")


# DuckDB's config for the reference: extensions only from the wheels, by path. Their signatures are not checked at
# each LOAD (allow_unsigned_extensions): the check reads the ~110 MB of the three files again every time, 0.8 s of CPU
# per connection against 0.03 s, and the suite opens thousands. The files are the official signed builds pip
# installed; skipping the check changes nothing they do.
CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False,
          "allow_unsigned_extensions": True}


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the ducklake, sqlite and postgres extensions loaded from the wheels."""
    con = duckdb.connect(config=CONFIG)
    for name in _EXTENSIONS:
        con.execute(f"LOAD '{extension_path(name)}'")
    return con


def attach_sql(catalog: str | CatalogLocation, alias: str = "lake", data_path: str | None = None,
               read_only: bool = False, options: dict[str, object] | None = None) -> str:
    """The ATTACH statement DuckDB needs for one of our catalogs."""
    loc = parse_catalog(catalog) if isinstance(catalog, str) else catalog
    opts: dict[str, object] = dict(options or {})
    if data_path is not None:
        opts["DATA_PATH"] = data_path
    if read_only:
        opts["READ_ONLY"] = True
    rendered = []
    for k, v in opts.items():
        if v is True:
            rendered.append(k)
        elif isinstance(v, str):
            rendered.append(f"{k} '{v}'")
        else:
            rendered.append(f"{k} {v}")
    tail = f" ({', '.join(rendered)})" if rendered else ""
    return f"ATTACH '{loc.duckdb_attach_target()}' AS {alias}{tail}"


@contextmanager
def attached(catalog: str | CatalogLocation, alias: str = "lake", **kw: object) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh DuckDB with the lake attached; detached and closed on exit (DuckDB files are locked while open)."""
    con = connect()
    try:
        con.execute(attach_sql(catalog, alias, **kw))  # type: ignore[arg-type]
        yield con
    finally:
        con.close()


def execute_all(catalog: str | CatalogLocation, statements: Iterable[str], **kw: object) -> None:
    """Run the statements, in order, in a fresh DuckDB with the lake attached (as `lake`)."""
    with attached(catalog, **kw) as con:
        for sql in statements:
            con.execute(sql)


def storage_version(path: str | os.PathLike[str]) -> str:
    """The storage format tag of a DuckDB database file (`v1.5.0+`, ...), as the installed duckdb reads it."""
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{path}' AS f (READ_ONLY)")
        return con.execute("SELECT tags['storage_version'] FROM duckdb_databases() WHERE database_name = 'f'"
                           ).fetchone()[0]
    finally:
        con.close()
