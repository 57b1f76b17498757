"""The reference scenarios build on every catalog backend, and each catalog holds the features its scenario claims.

The CLAIMS below document which catalog features each scenario produces (what a reader must handle to pass it).
Every scenario runs on each catalog backend in the full run, on two of them by default (PostgreSQL is the session's
test server).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from dbt.adapters.ducklake.lake.catalog.url import parse_catalog
from tests.conftest import reference_lake_of
from tests.support.coverage import FULL
from tests.support.reference_lakes import SCENARIOS


class Catalog:
    """Read access to the catalog tables, straight from the backend (SQLAlchemy), not through DuckDB."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.names = set(sa.inspect(conn).get_table_names())

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(sa.text(sql)).fetchall()]

    def one(self, sql: str) -> Any:
        return self.conn.execute(sa.text(sql)).scalar()

    def change_kinds(self) -> set[str]:
        """Kinds of all `changes_made` tokens (`inlined_insert`, `created_table`, ...)."""
        kinds = set()
        for (changes,) in self.rows("SELECT changes_made FROM ducklake_snapshot_changes"):
            kinds |= {token.split(":", 1)[0] for token in changes.split(",")}
        return kinds

    def inlined_rows(self, where: str = "1 = 1") -> dict[str, int]:
        """{inlined data table: rows matching `where`} for every registered inlined data table."""
        tables = [t for (t,) in self.rows("SELECT table_name FROM ducklake_inlined_data_tables")]
        return {t: self.one(f'SELECT count(*) FROM "{t}" WHERE {where}') for t in tables}

    def inlined_deletes(self) -> int:
        return sum(self.one(f'SELECT count(*) FROM "{t}"') for t in self.names if t.startswith("ducklake_inlined_delete"))

    def file_columns(self, where: str) -> list[list[str]]:
        """Top-level Parquet column names of the data files matching `where` (only files that still exist)."""
        data_path = self.one("SELECT value FROM ducklake_metadata WHERE key = 'data_path'")
        found = []
        for s_path, t_path, f_path in self.rows(
            "SELECT s.path, t.path, f.path FROM ducklake_data_file f JOIN ducklake_table t USING (table_id) "
            "JOIN ducklake_schema s ON s.schema_id = t.schema_id "
            f"WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL AND {where}"
        ):
            path = Path(data_path) / (s_path or "") / (t_path or "") / f_path
            if path.exists():
                found.append(pq.read_schema(path).names)
        return found


@contextmanager
def open_catalog(catalog: str) -> Iterator[Catalog]:
    url = parse_catalog(catalog).url
    engine = sa.create_engine(url, connect_args={"read_only": True} if url.get_backend_name() == "duckdb" else {})
    try:
        with engine.connect() as conn:
            yield Catalog(conn)
    finally:
        engine.dispose()


def _claims_inlined(c: Catalog) -> None:
    assert {"inlined_insert", "inlined_delete", "inserted_into_table", "altered_table"} <= c.change_kinds()
    live = c.inlined_rows()
    assert sum(n > 0 for n in live.values()) >= 3  # two schema versions of s.t, plus main.other
    assert sum(c.inlined_rows("end_snapshot IS NOT NULL").values()) >= 4  # deleted / updated inlined rows
    assert c.inlined_deletes() >= 3  # deletes and updates of rows in the Parquet file
    assert c.one("SELECT count(*) FROM ducklake_data_file") == 1
    assert c.one("SELECT count(*) FROM ducklake_delete_file") == 0


def _claims_repeated_deletes(c: Catalog) -> None:
    assert {"deleted_from_table", "inlined_delete", "inlined_insert"} <= c.change_kinds()
    assert c.one("SELECT count(*) FROM ducklake_delete_file WHERE partial_max > begin_snapshot") == 2
    assert c.inlined_deletes() >= 10
    assert c.one("SELECT count(*) FROM ducklake_files_scheduled_for_deletion") >= 3  # superseded delete files
    whole = "end_snapshot IS NOT NULL AND data_file_id NOT IN (SELECT data_file_id FROM ducklake_delete_file)"
    assert c.one(f"SELECT count(*) FROM ducklake_data_file WHERE {whole}") == 1


def _claims_deletion_vectors(c: Catalog) -> None:
    assert "deleted_from_table" in c.change_kinds()
    formats = {r[0] for r in c.rows("SELECT DISTINCT format FROM ducklake_delete_file")}
    assert formats == {"puffin", "parquet"}  # a vector, and a Parquet file written before the option was on
    assert c.one("SELECT count(*) FROM ducklake_files_scheduled_for_deletion") >= 2  # replaced vectors


def _claims_updates(c: Catalog) -> None:
    assert {"inserted_into_table", "deleted_from_table", "inlined_insert", "inlined_delete"} <= c.change_kinds()
    assert any("_ducklake_internal_row_id" in cols for cols in c.file_columns("f.end_snapshot IS NULL"))
    assert c.inlined_deletes() > 0
    assert c.one("SELECT count(*) FROM ducklake_delete_file WHERE partial_max IS NOT NULL") >= 1
    (table,) = c.inlined_rows()
    assert c.one(f'SELECT count(*) FROM (SELECT row_id FROM "{table}" GROUP BY row_id HAVING count(*) > 1) x') > 0


def _claims_schema_evolution(c: Catalog) -> None:
    renamed = "SELECT count(DISTINCT column_name) FROM ducklake_column WHERE column_id = 2"
    assert c.one(renamed) == 2  # b -> bee
    types = set(c.rows("SELECT column_name, column_type FROM ducklake_column WHERE column_name IN ('a', 'bee')"))
    assert {("a", "int32"), ("a", "int64"), ("bee", "float32"), ("bee", "float64")} <= types
    assert c.one("SELECT count(*) FROM ducklake_column WHERE initial_default = '7'") == 1
    assert c.one("SELECT count(*) FROM ducklake_column WHERE column_name = 'c' AND end_snapshot IS NOT NULL") == 1
    assert c.one("SELECT count(*) FROM ducklake_column WHERE column_name = 'y' AND parent_column IS NOT NULL") == 1
    assert c.one("SELECT count(DISTINCT table_name) FROM ducklake_table") == 2  # t renamed to t2, same id
    assert c.one("SELECT count(*) FROM ducklake_schema_versions") >= 9
    assert sum(n > 0 for n in c.inlined_rows().values()) == 9  # one inlined table per schema version
    assert c.one("SELECT count(*) FROM ducklake_data_file") == 9


def _claims_nested(c: Catalog) -> None:
    kinds = {t for (t,) in c.rows("SELECT DISTINCT column_type FROM ducklake_column WHERE parent_column IS NULL")}
    assert {"list", "struct", "map"} <= kinds
    assert c.one("SELECT count(*) FROM ducklake_column WHERE parent_column IS NOT NULL") >= 15
    assert sum(c.inlined_rows().values()) == 5
    assert c.one("SELECT count(*) FROM ducklake_data_file") >= 3
    assert c.one("SELECT count(*) FROM ducklake_delete_file") >= 1
    assert c.one("SELECT count(*) FROM ducklake_metadata WHERE scope = 'table'") == 1  # table-scoped inlining limit


def _claims_partitioning(c: Catalog) -> None:
    transforms = {t for (t,) in c.rows("SELECT transform FROM ducklake_partition_column")}
    assert transforms == {"identity", "year", "month", "day", "hour", "bucket(4)", "bucket(3)"}
    assert c.one("SELECT count(*) FROM ducklake_partition_info WHERE end_snapshot IS NOT NULL") == 4
    assert c.one("SELECT count(*) FROM ducklake_file_partition_value WHERE partition_value IS NULL") >= 3
    assert c.one("SELECT count(*) FROM ducklake_data_file WHERE partition_id IS NULL") == 2  # before / after
    assert c.one("SELECT count(DISTINCT partition_id) FROM ducklake_data_file") == 5
    assert c.one("SELECT count(*) FROM ducklake_data_file WHERE path LIKE '%=%'") >= 20  # hive-style directories
    assert c.one("SELECT count(*) FROM ducklake_data_file WHERE end_snapshot IS NOT NULL") > 0
    assert sum(c.inlined_rows().values()) == 1


def _claims_compaction(c: Catalog) -> None:
    assert {"merge_adjacent", "rewrite_delete", "inline_flush"} <= c.change_kinds()
    files = "SELECT count(*) FROM ducklake_data_file WHERE partial_max IS NOT NULL AND row_id_start IS NULL"
    assert c.one(files) == 1  # merged across a gap in row ids
    assert c.one(files.replace("IS NULL", "IS NOT NULL")) == 2  # flushed, and flushed files merged
    assert c.one("SELECT count(*) FROM ducklake_data_file WHERE partial_max IS NULL AND row_id_start IS NULL") == 1
    assert c.one("SELECT count(*) FROM ducklake_delete_file WHERE partial_max IS NOT NULL") >= 1
    assert any({"_ducklake_internal_row_id", "_ducklake_internal_snapshot_id"} <= set(cols)
               for cols in c.file_columns("f.partial_max IS NOT NULL"))
    ids = [s for (s,) in c.rows("SELECT snapshot_id FROM ducklake_snapshot ORDER BY 1")]
    assert len(ids) == max(ids) - 2  # three snapshots expired
    assert c.one("SELECT count(*) FROM ducklake_files_scheduled_for_deletion") == 0  # cleanup_all ran


def _claims_views_comments(c: Catalog) -> None:
    assert {"created_view", "dropped_view", "altered_view", "altered_table"} <= c.change_kinds()
    aliases = {a for (a,) in c.rows("SELECT column_aliases FROM ducklake_view")}
    assert {"", '"x","y"'} <= aliases
    assert c.one("SELECT count(*) FROM ducklake_view WHERE end_snapshot IS NOT NULL") == 3  # replaced, dropped, renamed
    assert c.one("SELECT count(*) FROM ducklake_tag WHERE key = 'comment' AND end_snapshot IS NOT NULL") == 2
    assert c.one("SELECT count(*) FROM ducklake_column_tag WHERE value IS NULL") == 1  # comment removed
    assert c.one("SELECT count(*) FROM ducklake_column_tag") == 4


_TYPE_NAMES = {
    "int8", "int16", "int32", "int64", "int128", "uint8", "uint16", "uint32", "uint64", "uint128", "float32",
    "float64", "decimal(4,1)", "decimal(18,3)", "decimal(38,10)", "varchar", "blob", "boolean", "date", "time",
    "timetz", "timestamp", "timestamptz", "timestamp_s", "timestamp_ms", "timestamp_ns", "uuid", "interval", "json",
}


def _claims_types(c: Catalog) -> None:
    assert {t for (t,) in c.rows("SELECT column_type FROM ducklake_column")} == _TYPE_NAMES
    assert sum(c.inlined_rows().values()) == 5
    assert c.one("SELECT count(*) FROM ducklake_data_file") == 1


def _claims_drops(c: Catalog) -> None:
    assert {"dropped_table", "dropped_schema", "dropped_view", "created_table"} <= c.change_kinds()
    assert c.one("SELECT count(*) FROM ducklake_table WHERE table_name = 't'") == 3  # three tables named a.t
    assert c.one("SELECT count(*) FROM ducklake_table WHERE end_snapshot IS NOT NULL") == 4
    assert c.one("SELECT count(*) FROM ducklake_schema WHERE schema_name = 'b'") == 2
    assert c.one("SELECT count(*) FROM ducklake_table WHERE table_name = 'tmp'") == 0  # created+dropped in one commit
    assert c.one("SELECT count(*) FROM ducklake_data_file WHERE end_snapshot IS NOT NULL") == 3
    assert sum(c.inlined_rows("end_snapshot IS NULL").values()) >= 4  # dropped tables keep their inlined rows


CLAIMS: dict[str, Callable[[Catalog], None]] = {
    "inlined": _claims_inlined,
    "repeated_deletes": _claims_repeated_deletes,
    "updates": _claims_updates,
    "schema_evolution": _claims_schema_evolution,
    "nested": _claims_nested,
    "partitioning": _claims_partitioning,
    "compaction": _claims_compaction,
    "deletion_vectors": _claims_deletion_vectors,
    "views_comments": _claims_views_comments,
    "types": _claims_types,
    "drops": _claims_drops,
}
_STATES: dict[tuple[str, str], dict[str, Any]] = {}


def test_every_scenario_has_claims() -> None:
    assert set(CLAIMS) == set(SCENARIOS)


def _scenario_backends() -> list[Any]:
    """Every scenario on every backend in the full run. By default each scenario on two backends, so that
    test_backends_agree still compares every scenario: the one test_read_conformance reads it on (backend i of the
    rotation) and the DuckDB file that tests/spark reads every scenario on (SQLite and PostgreSQL in turn for the
    scenarios whose rotation backend is already the DuckDB file); lakes of one worker are built once."""
    backends = ["duckdb", "sqlite", "postgres"]
    out = []
    for i, scenario in enumerate(sorted(SCENARIOS)):
        first = backends[i % 3]
        chosen = backends if FULL else [first, "duckdb" if first != "duckdb" else backends[1 + (i // 3) % 2]]
        for b in chosen:
            out.append(pytest.param(scenario, b, id=f"{b}-{scenario}",
                                    marks=[pytest.mark.postgres] if b == "postgres" else []))
    return out


@pytest.mark.parametrize(("scenario", "backend"), _scenario_backends())
def test_scenario(scenario: str, backend: str, request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> None:
    built = reference_lake_of(scenario, backend, request, tmp_path_factory)
    catalog, state = built.catalog, built.state
    backend = catalog.split(":", 1)[0]
    with open_catalog(catalog) as c:
        CLAIMS[scenario](c)
    snapshot_ids = [s[0] for s in state["snapshots"]]
    assert len(snapshot_ids) >= 6
    assert {sid for sid, _, _ in state["tables"]} <= set(snapshot_ids)
    assert any(entry["rows"] for entry in state["tables"].values())
    assert any(state["changes"].values())
    for key, entry in state["tables"].items():
        assert entry["count"] == len(entry["rows"]), key  # count(*) from metadata agrees with the scan
        rowids = [row[0] for row in entry["rows"]]
        assert len(set(rowids)) == len(rowids), key
    latest = [key for key in state["tables"] if key[0] == snapshot_ids[-1]]
    assert latest, "the latest snapshot has tables"
    _STATES[(scenario, backend)] = state


def _comparable(state: dict[str, Any]) -> dict[str, Any]:
    """Everything but snapshot times (and view SQL, which is the same text).

    Change rows are compared without their snapshot id: DuckDB 1.5.5 once (in ~10 CI runs) wrote the deletes of
    `repeated_deletes`' 12th snapshot (ids 60-69: ten inlined deletes on a file that already had a delete file) so
    that ducklake_table_changes reported them with snapshot 4 on one backend and 12 on the other. That is DuckDB's
    writer, not our reader: the per-backend conformance tests compare our change feed with DuckDB's exactly,
    snapshot ids included, on each lake as DuckDB wrote it.
    """
    return {
        "snapshots": [(s[0], s[2], s[3]) for s in state["snapshots"]],
        "tables": state["tables"],
        "views": state["views"],
        "changes": {k: sorted(r[1:] for r in rows) for k, rows in state["changes"].items()},
    }


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_backends_agree(scenario: str) -> None:
    """DuckDB gives the same answers whichever backend holds the catalog (uses states of test_scenario runs)."""
    states = {backend: s for (name, backend), s in _STATES.items() if name == scenario}
    if len(states) < 2:
        pytest.skip("needs test_scenario to have run on two backends in this session")
    first, *others = states
    for other in others:
        assert _comparable(states[other]) == _comparable(states[first]), (first, other)
