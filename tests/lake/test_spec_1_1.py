"""DuckLake 1.1 catalogs (DuckDB 2.0's default), read and written by the format layer.

DuckDB 2.0 cannot run here (its extension downloads at run time), so the 1.1 lakes are made from the specification
(tests/support/spec_1_1.py): DuckDB 1.5.5 writes a 1.0 lake and records its answers at every snapshot, the lake is
migrated as the specification says, and our reads of the 1.1 lake must equal those answers. What we write into a
1.1 lake is judged by DuckDB 1.5.5 on the same lake turned back into 1.0, or, for what 1.0 cannot express (Puffin
files of several snapshots, epoch_* partition values), against the specification's definitions computed by DuckDB.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import struct

import pyarrow as pa
import pytest
import sqlalchemy as sa

from dbt.adapters.ducklake.lake.errors import SchemaEvolutionError, UnsupportedFeatureError
from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.maintenance.cleanup import expire_snapshots
from dbt.adapters.ducklake.lake.read.changes import read_changes
from dbt.adapters.ducklake.lake.records import Column
from dbt.adapters.ducklake.lake.write.writer import write_data_files
from tests.lake.compare import arrow_rows
from tests.lake.test_deletion_vectors import COLUMNS, _ours, _rows
from tests.lake.test_write_conformance import append, delete_ids, rows_table
from tests.support import reference, spec_1_1
from tests.support.invariants import violations


def _catalog_rows(lake: DuckLake, sql: str) -> list[tuple]:
    with lake.db.read() as conn:
        return [tuple(r) for r in lake.db.query(conn, sql)]


def test_we_read_a_1_1_lake_at_every_snapshot(catalog_url: str, data_path: str) -> None:
    """Inlined rows under their renamed system columns, a Puffin file of three snapshots' vectors (made from DuckDB's
    Parquet delete file of those snapshots), a view: every table at every snapshot and the change feed equal DuckDB
    1.5.5's answers on the lake before migration."""
    with reference.attached(catalog_url, data_path=data_path) as con:
        con.execute("CALL lake.set_option('data_inlining_row_limit', 10)")
        con.execute("CREATE TABLE lake.small (id BIGINT, v VARCHAR)")
        con.execute("INSERT INTO lake.small VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        con.execute("DELETE FROM lake.small WHERE id = 2")
        con.execute("CREATE TABLE lake.t AS SELECT i::BIGINT AS id, 'v' || i AS v FROM range(3000) t(i)")
        first = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        for k in (10, 7, 11):  # three deletes of one data file: a delete file naming each position's snapshot
            con.execute(f"DELETE FROM lake.t WHERE id % {k} = 0")
        con.execute("CREATE VIEW lake.vw AS SELECT id FROM lake.t WHERE id < 100")
        last = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        want = {(n, v): _rows(con, f"SELECT id, v FROM lake.{n} AT (VERSION => {v})")
                for n, since in (("small", 2), ("t", first)) for v in range(since, last + 1)}
        changes = _rows(con, f"SELECT snapshot_id, rowid, change_type, id, v FROM "
                             f"ducklake_table_changes('lake', 'main', 't', {first}, {last})")
        small_changes = _rows(con, f"SELECT snapshot_id, rowid, change_type, id, v FROM "
                                   f"ducklake_table_changes('lake', 'main', 'small', 2, {last})")
    spec_1_1.migrate(catalog_url)
    assert spec_1_1.consolidate_vectors(catalog_url, data_path) == 1

    lake = DuckLake.open(catalog_url)
    assert lake.db.spec.is_1_1 and lake.db.spec.row_group_counts
    (fmt, begin, pmax), = _catalog_rows(lake, "SELECT format, begin_snapshot, partial_max FROM {p}ducklake_delete_file")
    assert (fmt, begin, pmax) == ("puffin", first + 1, first + 3)
    for (name, v), rows in want.items():
        assert _ours(lake, v, name) == rows, f"{name} at snapshot {v}"
    ours = read_changes(lake, "main", "t", first, last).select(["snapshot_id", "rowid", "change_type", "id", "v"])
    assert sorted(arrow_rows(ours)) == changes
    ours = read_changes(lake, "main", "small", 2, last).select(["snapshot_id", "rowid", "change_type", "id", "v"])
    assert sorted(arrow_rows(ours)) == small_changes
    assert lake.snapshot().view("main", "vw").sql.strip().startswith("SELECT")
    lake.close()


def test_what_we_write_into_a_1_1_lake_is_what_duckdb_reads(catalog_url: str, data_path: str) -> None:
    """A 1.1 lake we create: files carry their row-group counts, inlined-data tables the 1.1 system columns; the
    same lake turned back into 1.0 reads in DuckDB 1.5.5 as ours at every snapshot."""
    lake = DuckLake.create(catalog_url, data_path, version="1.1")
    lake.set_option("data_inlining_row_limit", "10")
    with lake.transaction() as tx:
        tx.create_table("main", "t", COLUMNS)
    table = lake.snapshot().table("main", "t")
    versions = [append(lake, table, [{"id": i, "v": f"v{i}"} for i in range(2000)], "first")]
    versions.append(append(lake, table, [{"id": i, "v": f"w{i}"} for i in range(3000, 3500)], "second"))
    versions.append(delete_ids(lake, "main", "t", set(range(0, 2000, 3)), "delete a third"))
    versions.append(delete_ids(lake, "main", "t", set(range(1, 2000, 5)) | {3001}, "delete again"))
    ours = {v: _ours(lake, v) for v in versions}
    assert {r[0] for r in _catalog_rows(lake, "SELECT row_group_count FROM {p}ducklake_data_file")} == {1}
    assert {r[0] for r in _catalog_rows(lake, "SELECT row_group_count FROM {p}ducklake_delete_file")} == {1}
    (inlined,), = _catalog_rows(lake, "SELECT table_name FROM {p}ducklake_inlined_data_tables")
    with lake.db.read() as conn:
        result = conn.execute(sa.text(f"SELECT * FROM {lake.db.t(inlined)} LIMIT 0"))
        cols = [c.lower() for c in result.keys()]  # noqa: SIM118 (a result's column names)
    assert cols[:3] == ["_ducklake_row_id", "_ducklake_begin_snapshot", "_ducklake_end_snapshot"]
    lake.close()
    assert violations(catalog_url) == []
    spec_1_1.to_1_0(catalog_url)
    with reference.attached(catalog_url, read_only=True) as con:
        for v in versions:
            assert _rows(con, f"SELECT id, v FROM lake.t AT (VERSION => {v})") == ours[v], f"snapshot {v}"


def test_deletes_of_several_snapshots_share_one_puffin_file(file_catalog_url: str, data_path: str) -> None:
    """With deletion vectors on, a 1.1 lake keeps a data file's deletes in one Puffin file of cumulative vectors,
    each naming its snapshot; the older row goes; time travel and the change feed keep every delete's snapshot."""
    lake = DuckLake.create(file_catalog_url, data_path, version="1.1")
    lake.set_option("write_deletion_vectors", "true")
    lake.set_option("data_inlining_row_limit", "0")
    with lake.transaction() as tx:
        tx.create_table("main", "t", COLUMNS)
    table = lake.snapshot().table("main", "t")
    base = append(lake, table, [{"id": i, "v": f"v{i}"} for i in range(1000)], "rows")
    gone: dict[int, set[int]] = {base: set()}
    deletes = [set(range(0, 1000, 7)), set(range(0, 1000, 5)), {1, 2, 999}]
    snaps = []
    for ids in deletes:
        snaps.append(delete_ids(lake, "main", "t", ids, "delete"))
        gone[snaps[-1]] = gone[max(gone)] | ids
    (did, fmt, begin, pmax, count, path, footer, rgc), = _catalog_rows(
        lake, "SELECT delete_file_id, format, begin_snapshot, partial_max, delete_count, path, footer_size, "
              "row_group_count FROM {p}ducklake_delete_file")
    assert (fmt, begin, pmax, count, rgc) == ("puffin", snaps[0], snaps[-1], len(gone[snaps[-1]]), None)
    with open(os.path.join(data_path, "main", "t", path), "rb") as fh:
        raw = fh.read()
    assert raw[:4] == b"PFA1" and raw[-4:] == b"PFA1" and footer == struct.unpack("<I", raw[-12:-8])[0] + 12
    payload = json.loads(raw[len(raw) - footer:-12])
    assert [(b["type"], int(b["properties"]["ducklake-snapshot-id"]), int(b["properties"]["cardinality"]))
            for b in payload["blobs"]] == [("deletion-vector-v1", s, len(gone[s])) for s in snaps]
    for v, ids in gone.items():
        assert _ours(lake, v) == sorted((i, f"v{i}") for i in range(1000) if i not in ids), f"snapshot {v}"
    feed = read_changes(lake, "main", "t", snaps[0], snaps[-1]).select(["snapshot_id", "change_type", "id"])
    expected = [(s, "delete", i) for s, before in zip(snaps, [base, *snaps], strict=False)
                for i in sorted(gone[s] - gone[before])]
    assert sorted(arrow_rows(feed)) == sorted(expected)
    lake.close()
    assert violations(file_catalog_url) == []


def test_epoch_partitions_hold_the_specifications_values(file_catalog_url: str, data_path: str) -> None:
    """epoch_year/month/day/hour store whole units since 1970-01-01, floored: DuckDB's date_diff computes the same."""
    lake = DuckLake.create(file_catalog_url, data_path, version="1.1")
    cols = [Column(0, "d", "date"), Column(0, "ts", "timestamp"), Column(0, "tz", "timestamptz")]
    fields = [("d", "epoch_day"), ("d", "epoch_month"), ("ts", "epoch_hour"), ("ts", "epoch_year"),
              ("tz", "epoch_day")]
    with lake.transaction() as tx:
        tx.create_table("main", "p", cols, partition_by=fields)
    table = lake.snapshot().table("main", "p")
    values = [(dt.date(1969, 12, 31), dt.datetime(1969, 12, 31, 23, 30), dt.datetime(1969, 12, 31, 23, 59,
                                                                                       tzinfo=dt.timezone.utc)),
              (dt.date(2020, 1, 1), dt.datetime(2017, 11, 16, 22, 31, 8), dt.datetime(2024, 2, 29, 0, 0, 1,
                                                                                     tzinfo=dt.timezone.utc)),
              (None, None, None)]
    data = rows_table(list(table.columns), [{"d": d, "ts": t, "tz": z} for d, t, z in values])
    specs = write_data_files(table, lake.snapshot().table_path(table), data)
    with lake.transaction() as tx:
        tx.add_data_files("main", "p", specs)
    stored = {tuple(s.partition_values) for s in specs}
    lake.close()
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    want = set()
    for d, t, z in values:
        row = con.execute(
            "SELECT date_diff('day', DATE '1970-01-01', $1::DATE), date_diff('month', DATE '1970-01-01', $1::DATE), "
            "date_diff('hour', TIMESTAMP '1970-01-01', $2::TIMESTAMP), "
            "date_diff('year', TIMESTAMP '1970-01-01', $2::TIMESTAMP), "
            "date_diff('day', TIMESTAMPTZ '1970-01-01 00:00:00+00', $3::TIMESTAMPTZ)", [d, t, z]).fetchone()
        want.add(tuple(None if x is None else str(x) for x in row))
    # DuckDB's date_diff counts boundaries crossed: for the hour before 1970 that is -1, the floor the spec asks for
    assert stored == want


def test_one_zero_lakes_refuse_the_1_1_features_by_name(catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    with lake.transaction() as tx:
        tx.create_table("main", "t", [Column(0, "d", "date")])
        tx.create_view("main", "vw", "SELECT 1 AS x")
    with pytest.raises(SchemaEvolutionError, match="epoch_day is a DuckLake 1.1 feature"), lake.transaction() as tx:
        tx.set_partitioning("main", "t", [("d", "epoch_day")])
    with pytest.raises(UnsupportedFeatureError, match="view column tags are a DuckLake 1.1 feature"), \
            lake.transaction() as tx:
        tx.set_comment("main", "vw", "the x", column="x")
    assert lake.snapshot().table("main", "t").partition is None  # the lake is as it was
    lake.close()


def test_view_column_comments_and_nested_schemas(file_catalog_url: str, data_path: str) -> None:
    """A 1.1 view's column comment lives in ducklake_view_column_tag (ended when the view goes); a table inside a
    nested schema is refused by name while the rest of the lake reads."""
    lake = DuckLake.create(file_catalog_url, data_path, version="1.1")
    with lake.transaction() as tx:
        tx.create_table("main", "t", COLUMNS)
        tx.create_view("main", "vw", "SELECT id AS x FROM main.t")
    with lake.transaction() as tx:
        tx.set_comment("main", "vw", "the x", column="x")
    assert lake.snapshot().view("main", "vw").column_tags == {"x": {"comment": "the x"}}
    with lake.transaction() as tx:
        tx.drop_view("main", "vw")
    rows = _catalog_rows(lake, "SELECT column_name, key, value, end_snapshot IS NOT NULL FROM "
                               "{p}ducklake_view_column_tag")
    assert rows == [("x", "comment", "the x", True)]
    expire_snapshots(lake, versions=list(range(1, lake.latest_snapshot_id())))
    assert _catalog_rows(lake, "SELECT count(*) FROM {p}ducklake_view_column_tag") == [(0,)]  # no snapshot sees it
    # a nested schema as DuckDB 2.0 stores it: a schema row naming its parent
    with lake.db.write() as conn:
        lake.db.execute(conn, "ALTER TABLE {p}ducklake_schema ADD COLUMN parent_schema_id BIGINT")
    lake.close()
    lake = DuckLake.open(file_catalog_url)
    sid = lake.latest_snapshot_id()
    with lake.db.write() as conn:
        lake.db.execute(conn, "INSERT INTO {p}ducklake_schema (schema_id, schema_uuid, begin_snapshot, schema_name, "
                              "path, path_is_relative, parent_schema_id) VALUES (900, :u, :s, 'europe', "
                              "'main/europe/', :t, 0)", {"u": "00000000-0000-0000-0000-000000000001", "s": sid,
                                                          "t": lake.db.dialect.bool_param(True)})
    lake.close()
    lake = DuckLake.open(file_catalog_url)
    with pytest.raises(UnsupportedFeatureError, match="'main.europe' is a nested schema"):
        lake.snapshot().table("main.europe", "t")
    assert _ours(lake, lake.latest_snapshot_id()) == []
    lake.close()


def test_a_position_counts_from_the_first_vector_that_holds_it() -> None:
    import numpy as np

    from dbt.adapters.ducklake.lake.read import puffin

    pos, snaps = puffin.attribute([(9, np.array([1, 2, 5])), (4, np.array([2])), (12, np.array([1, 2, 5, 7]))])
    assert pos.tolist() == [1, 2, 5, 7] and snaps.tolist() == [9, 4, 9, 12]
    assert pa.array(pos).type == pa.int64()
