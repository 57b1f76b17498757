"""Fields added, dropped, renamed and widened inside struct columns (also in list elements and map values): the same
ducklake_column rows as DuckDB writes for the same ALTERs on a parallel lake, and every snapshot reads the same on
both sides (old files read new fields as NULL, renamed fields by id, widened fields cast)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake, read_arrow, write_data_files
from dbt.adapters.ducklake.lake.errors import NoSuchColumnError, SchemaEvolutionError
from dbt.adapters.ducklake.lake.write.transaction import Transaction
from tests.lake.compare import arrow_rows, plain_rows
from tests.support import reference
from tests.support.invariants import violations

COLUMN_ROWS = ("SELECT column_id, begin_snapshot, end_snapshot, table_id, column_order, column_name, column_type, "
               "initial_default, default_value, nulls_allowed, parent_column, default_value_type, "
               "default_value_dialect FROM __ducklake_metadata_lake.ducklake_column ORDER BY column_id, begin_snapshot")
VERSION_ROWS = "SELECT * FROM __ducklake_metadata_lake.ducklake_schema_versions ORDER BY begin_snapshot"


def _c(name: str, type_: str, *children: Column) -> Column:
    return Column(0, name, type_, children=children)


# each step: the reference's statement, and the same change through our transaction
STEPS: list[tuple[str, Callable[[Transaction], None] | None]] = [
    ("ALTER TABLE lake.t ADD COLUMN s.c BIGINT",
     lambda tx: tx.add_field("main", "t", ("s", "c"), _c("c", "int64"))),
    ("INSERT INTO lake.t VALUES (2, {'a': 2, 'b': 'y', 'c': 20}, [{'x': 2}], MAP {'k': {'p': 2}})", None),
    ("ALTER TABLE lake.t RENAME s.b TO bb",
     lambda tx: tx.rename_field("main", "t", ("s", "b"), "bb")),
    ("ALTER TABLE lake.t ALTER s TYPE STRUCT(a BIGINT, bb VARCHAR, c BIGINT, d STRUCT(e INT, f INT[]))",
     lambda tx: tx.evolve_column("main", "t", "s", _c("s", "struct", _c("a", "int64"), _c("bb", "varchar"),
                                                       _c("c", "int64"), _c("d", "struct", _c("e", "int32"),
                                                                            _c("f", "list", _c("element", "int32")))))),
    ("ALTER TABLE lake.t ALTER l TYPE STRUCT(x BIGINT, y VARCHAR)[]",
     lambda tx: tx.evolve_column("main", "t", "l", _c("l", "list", _c("element", "struct", _c("x", "int64"),
                                                                       _c("y", "varchar"))))),
    ("ALTER TABLE lake.t DROP COLUMN s.c",
     lambda tx: tx.drop_field("main", "t", ("s", "c"))),
    ("ALTER TABLE lake.t ADD COLUMN m.value.q STRUCT(r INT)",
     lambda tx: tx.add_field("main", "t", ("m", "value", "q"), _c("q", "struct", _c("r", "int32")))),
    ("ALTER TABLE lake.t ADD COLUMN s.c VARCHAR",  # the name again: a new id, old files' c stays unseen
     lambda tx: tx.add_field("main", "t", ("s", "c"), _c("c", "varchar"))),
    ("ALTER TABLE lake.t ALTER s TYPE STRUCT(a BIGINT, c VARCHAR)",  # drops bb and d, d's children with it
     lambda tx: tx.evolve_column("main", "t", "s", _c("s", "struct", _c("a", "int64"), _c("c", "varchar")))),
    # c was added by ADD COLUMN: DuckDB stores nulls_allowed=false for it, yet takes NULLs there, and so do we
    ("INSERT INTO lake.t VALUES (3, {'a': 3, 'c': NULL}, [{'x': 3, 'y': 'w'}], MAP {'k': {'p': 3, 'q': {'r': 3}}})",
     None),
]


def test_nested_changes_write_duckdbs_rows_and_read_alike(data_path: str, tmp_path: Path) -> None:
    # a DuckDB-file catalog: every backend takes the same statements (catalog_rows), which other tests cover
    catalog = f"duckdb:///{tmp_path}/metadata.ducklake"
    ref_catalog = f"{tmp_path}/reference.ducklake"
    ref = reference.connect()
    ref.execute(reference.attach_sql(ref_catalog, data_path=f"{tmp_path}/ref_data/",
                                     options={"DATA_INLINING_ROW_LIMIT": 0}))
    ref.execute("CREATE TABLE lake.t (id INT, s STRUCT(a INT, b VARCHAR), l STRUCT(x INT)[], "
                "m MAP(VARCHAR, STRUCT(p INT)))")
    lake = DuckLake.create(catalog, data_path)
    with lake.transaction() as tx:
        tx.create_table("main", "t", [
            _c("id", "int32"), _c("s", "struct", _c("a", "int32"), _c("b", "varchar")),
            _c("l", "list", _c("element", "struct", _c("x", "int32"))),
            _c("m", "map", _c("key", "varchar"), _c("value", "struct", _c("p", "int32")))])

    def insert(sql: str) -> None:
        ref.execute(sql)
        row_id = int(sql.split("VALUES (")[1].split(",")[0])
        data = ref.execute(f"SELECT * FROM lake.t WHERE id = {row_id}").to_arrow_table()
        table = lake.snapshot().table("main", "t")
        with lake.transaction() as tx:
            tx.add_data_files("main", "t", write_data_files(table, lake.snapshot().table_path(table), data))

    insert("INSERT INTO lake.t VALUES (1, {'a': 1, 'b': 'x'}, [{'x': 1}], MAP {'k': {'p': 1}})")
    for sql, ours in STEPS:
        if ours is None:
            insert(sql)
            continue
        ref.execute(sql)
        with lake.transaction() as tx:
            ours(tx)

    # impossible changes: a clear error naming the field, and the lake as it was
    last = lake.snapshot().snapshot.snapshot_id
    impossible = [
        (lambda tx: tx.evolve_column("main", "t", "s", _c("s", "struct", _c("a", "int32"), _c("c", "varchar"))),
         "cannot change 's.a' from int64 to int32: only widening"),
        (lambda tx: tx.evolve_column("main", "t", "s", _c("s", "int32")),
         "cannot change 's' from struct to int32"),
        (lambda tx: tx.evolve_column("main", "t", "l", _c("l", "list", _c("element", "int32"))),
         "cannot change 'l.element' from struct to int32"),
        (lambda tx: tx.add_field("main", "t", ("l", "z"), _c("z", "int32")),
         "fields can only be added to structs, 'l' is a list"),
        (lambda tx: tx.drop_field("main", "t", ("m", "value", "q", "r")),
         "it is the only field of 'm.value.q'"),
        (lambda tx: tx.rename_field("main", "t", ("s", "a"), "C"),
         "'s' already has a field 'C'"),
        (lambda tx: tx.drop_field("main", "t", ("s", "nope")),
         "s has no field 'nope'"),
    ]
    for change, message in impossible:
        with pytest.raises((SchemaEvolutionError, NoSuchColumnError), match=message), lake.transaction() as tx:
            tx.add_field("main", "t", ("s", "ok"), _c("ok", "int32"))  # staged first: dropped with the failure
            change(tx)
    assert lake.snapshot().snapshot.snapshot_id == last

    states = {n: lake.snapshot(n) for n in range(1, last + 1)}
    ours_by_snapshot = {n: arrow_rows(read_arrow(st, st.table("main", "t"), with_rowid=False)) for n, st in states.items()}
    lake.close()
    ref_columns = ref.execute(COLUMN_ROWS).fetchall()
    ref_versions = ref.execute(VERSION_ROWS).fetchall()
    ref_reads = {n: plain_rows(ref.execute(f"SELECT * FROM lake.t AT (VERSION => {n})").fetchall())
                 for n in states}
    ref.close()
    with reference.attached(catalog, read_only=True) as con:
        assert con.execute(COLUMN_ROWS).fetchall() == ref_columns
        assert con.execute(VERSION_ROWS).fetchall() == ref_versions
        for n in states:
            duck = plain_rows(con.execute(f"SELECT * FROM lake.t AT (VERSION => {n})").fetchall())
            assert duck == ref_reads[n] == ours_by_snapshot[n], n
    assert violations(catalog) == []
    # and our reader reads the lake DuckDB evolved as DuckDB reads it
    theirs = DuckLake.open(ref_catalog)
    try:
        for n in states:
            st = theirs.snapshot(n)
            assert arrow_rows(read_arrow(st, st.table("main", "t"), with_rowid=False)) == ref_reads[n], n
    finally:
        theirs.close()
