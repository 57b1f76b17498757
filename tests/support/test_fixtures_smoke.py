"""The shared fixtures work: every catalog_url is fresh and reachable with SQLAlchemy and by the reference DuckDB."""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

_seen: set[str] = set()


def _engine(url: str) -> sa.Engine:
    u = make_url(url)
    if u.drivername == "postgresql":  # SQLAlchemy's default driver is psycopg2; we ship psycopg 3
        u = u.set(drivername="postgresql+psycopg")
    return sa.create_engine(u, poolclass=sa.pool.NullPool)


@pytest.mark.parametrize("round_", [1, 2])
def test_catalog_url_is_fresh_and_usable(catalog_url: str, round_: int) -> None:
    assert catalog_url not in _seen, "catalog_url handed out the same location twice"
    _seen.add(catalog_url)
    u = make_url(catalog_url)
    if u.drivername in ("duckdb", "sqlite"):
        assert os.path.isabs(u.database) and not os.path.exists(u.database)
    else:
        assert u.drivername == "postgresql" and u.host == "127.0.0.1" and u.username
    engine = _engine(catalog_url)
    try:
        with engine.begin() as con:
            assert sa.inspect(con).get_table_names() == [], "catalog database is not empty"
            con.execute(sa.text("CREATE TABLE smoke (id INTEGER PRIMARY KEY, name VARCHAR)"))
            con.execute(sa.text("INSERT INTO smoke VALUES (1, 'a'), (2, 'b')"))
        with engine.connect() as con:
            assert con.execute(sa.text("SELECT count(*) FROM smoke")).scalar_one() == 2
    finally:
        engine.dispose()


def test_file_catalog_url_is_a_file_backend(file_catalog_url: str) -> None:
    assert make_url(file_catalog_url).drivername in ("duckdb", "sqlite")


def test_data_path(data_path: str) -> None:
    assert data_path.endswith("/") and os.path.isdir(data_path) and not os.listdir(data_path)


def test_reference_duckdb_attaches_catalog_url(catalog_url: str, data_path: str) -> None:
    from tests.support import reference

    with reference.attached(catalog_url, data_path=data_path) as con:
        con.execute("CREATE TABLE lake.t AS SELECT range AS i FROM range(3)")
        assert con.execute("SELECT sum(i) FROM lake.t").fetchone() == (3,)
    with reference.attached(catalog_url, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM lake.t").fetchone() == (3,)
