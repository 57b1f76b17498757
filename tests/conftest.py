"""Shared fixtures: catalog locations on every backend, a data path, and the session's PostgreSQL server.

dbt's test fixtures (`project`, `unique_schema`, ...) are loaded here because pytest only takes `pytest_plugins`
from the top-level conftest; tests/functional/conftest.py sets the ducklake profile they use.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import postgres, s3
from tests.support.reference_lakes import build, reference_state
from tests.support.spark_cluster import C1_ONLY

pytest_plugins = ["dbt.tests.fixtures.project"]

# every commit of every test (and of the dbt processes tests start) compares the state the lake keeps after it
# with a load of the catalog (DuckLake.note_commit)
os.environ.setdefault("DUCKLAKE_CHECK_COMMITTED_STATE", "1")
# `master: auto` picks the embedded driver in tests even when pytest runs at a terminal with -s (tests of the choice
# set it themselves)
os.environ.setdefault("DBT_DUCKLAKE_WARM", "0")
# every driver JVM spark-submit starts here (the tests' own sessions, each dbt process's, the local servers): C1 JIT
# only. The suite's JVMs are short-lived and share two cores, where C2's compiler threads are most of a JVM's CPU: three
# drivers' start and small queries at once take 39 s instead of 78 s. The JIT tier changes no result.
os.environ.setdefault("SPARK_SUBMIT_OPTS", C1_ONLY)

CATALOG_BACKENDS = [
    pytest.param("duckdb", id="duckdb"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
FILE_CATALOG_BACKENDS = [
    pytest.param("duckdb", id="duckdb"),
    pytest.param("sqlite", id="sqlite"),
]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[postgres.PostgresServer]:
    """The session's PostgreSQL server; started on first use only (or $DUCKLAKE_TEST_PG_URL's server)."""
    try:
        server = postgres.start()
    except postgres.PostgresUnavailable as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


def _database_name(request: pytest.FixtureRequest) -> str:
    """A unique, readable database name: the test's name (sanitised) plus a random suffix."""
    stem = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")[:40] or "t"
    return f"{stem}_{uuid.uuid4().hex[:10]}"


def _catalog_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "duckdb":
        return f"duckdb:///{tmp_path}/metadata.ducklake"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/metadata.sqlite"
    if backend == "postgres":
        server: postgres.PostgresServer = request.getfixturevalue("pg_server")
        return server.create_database(_database_name(request))
    raise AssertionError(f"unknown catalog backend {backend!r}")


@pytest.fixture(params=CATALOG_BACKENDS)
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh catalog location on each backend: duckdb:///…/metadata.ducklake, sqlite:///…/metadata.sqlite,
    or postgresql://postgres@127.0.0.1:<port>/<new database>."""
    return _catalog_url(request.param, request, tmp_path)


@pytest.fixture(params=FILE_CATALOG_BACKENDS)
def file_catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Like `catalog_url` but only the file backends (DuckDB, SQLite)."""
    return _catalog_url(request.param, request, tmp_path)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3.S3Server]:
    """The session's local S3 (moto's server on 127.0.0.1, path-style); started on first use only."""
    log = tmp_path_factory.mktemp("s3") / "moto.log"
    with s3.moto_server(str(log)) as server:
        yield server


@pytest.fixture
def data_path(tmp_path: Path) -> str:
    """An existing, empty directory for the lake's data files, as a string ending in '/'."""
    path = tmp_path / "data"
    path.mkdir(exist_ok=True)
    return str(path) + "/"


@dataclass(frozen=True)
class ReferenceLake:
    """A lake DuckDB built from a scenario (tests/support/reference_lakes) and DuckDB's answers about it."""

    catalog: str
    data_path: str
    state: dict[str, Any]


# built once per test process: a scenario's lake and its reference state cost seconds, and several read-only
# conformance tests (our reader, Spark's scan, the reference's own claims) read the same lakes
_REFERENCE_LAKES: dict[tuple[str, str], ReferenceLake] = {}


def reference_lake_of(scenario: str, backend: str, request: pytest.FixtureRequest,
                      tmp_path_factory: pytest.TempPathFactory) -> ReferenceLake:
    """The shared lake of `scenario` on `backend`: callers only read it (copy it to change it)."""
    key = (scenario, backend)
    if key not in _REFERENCE_LAKES:
        root = tmp_path_factory.mktemp(f"reference-{scenario}-{backend}")
        (root / "data").mkdir()
        catalog = _catalog_url(backend, request, root)
        build(catalog, f"{root}/data/", scenario)
        _REFERENCE_LAKES[key] = ReferenceLake(catalog, f"{root}/data/", reference_state(catalog))
    return _REFERENCE_LAKES[key]


@pytest.fixture(params=CATALOG_BACKENDS)
def reference_lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                   ) -> Callable[[str], ReferenceLake]:
    """On each backend: `reference_lake(scenario)` is the shared, read-only lake of the scenario (see
    `reference_lake_of`)."""
    backend = str(request.param)
    return lambda scenario: reference_lake_of(scenario, backend, request, tmp_path_factory)


# Under pytest-xdist (scripts/test.sh: two workers, one scope per class or module) the longest scopes go first, so
# that no worker is left alone with one at the end, and the modules reading the shared reference lakes come first
# together, so that one worker's initial batch holds them and builds each lake once. This order needs
# `--no-loadscope-reorder` (pytest-xdist >= 3.6 otherwise sorts scopes by their number of tests).
_XDIST_FIRST = (
    "tests/functional/test_cluster_hosts.py", "tests/functional/test_busy_lake.py",
    "tests/functional/test_writers.py", "tests/functional/test_write_audit_publish.py",
    "tests/functional/test_many_files.py", "tests/lake/test_read_conformance.py", "tests/spark/test_scan.py",
    "tests/support/test_reference_lakes.py", "tests/spark/test_changes.py",
    "tests/lake/test_maintenance.py", "tests/functional/adapter/test_snapshots.py",
    "tests/functional/test_snapshot_scenarios.py", "tests/functional/test_change_feed.py",
    "tests/spark/test_connect.py", "tests/functional/test_threads.py", "tests/functional/test_incremental_scenarios.py",
    "tests/spark/test_fuzz.py", "tests/functional/test_python_models.py",
    "tests/functional/test_local_server_dbt.py", "tests/spark/test_local_server_shortcuts.py", "tests/lake/test_clone.py",
    "tests/functional/test_column_types.py", "tests/spark/test_column_types.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return _XDIST_FIRST.index(path) if path in _XDIST_FIRST else len(_XDIST_FIRST)

    items.sort(key=rank)  # stable: the order within a module is kept
