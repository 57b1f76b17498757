"""Write options and sort keys against the reference: DuckDB and our writers write into the same lake with the same
settings; the files' codec, row groups, sizes and row order are compared, DuckDB reads every row, and the catalog rows
of SET SORTED BY and of table options are DuckDB's."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake, write_data_files
from dbt.adapters.ducklake.lake.maintenance.compaction import merge_adjacent_files
from dbt.adapters.ducklake.lake.write.layout import WriteOptions
from tests.support import reference

ROWS = 50_000


def _rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"a": pa.array(ids, pa.int64()), "b": pa.array([f"v{i * 7919 % 100_003}" for i in ids])})


def _files(directory: str) -> list[pq.FileMetaData]:
    return [pq.ParquetFile(f).metadata for f in sorted(glob.glob(f"{directory}/*.parquet"), key=os.path.getmtime)]


def _layout(meta: pq.FileMetaData) -> tuple[str, list[int]]:
    return (meta.row_group(0).column(0).compression, [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])


@pytest.fixture
def lake(tmp_path: Path) -> DuckLake:
    lake = DuckLake.create(str(tmp_path / "m.ducklake"), str(tmp_path / "data"))
    yield lake
    lake.close()


def _duck(lake: DuckLake, *statements: str) -> list[tuple]:
    with reference.attached(lake.db.location) as con:
        out: list[tuple] = []
        for s in statements:
            out = con.execute(s).fetchall()
        return out


def test_files_have_the_layout_duckdb_gives_them(lake: DuckLake, tmp_path: Path) -> None:
    """Table options set by DuckDB (zstd, 3000-row groups, 100 kB files; gzip for the schema, which the table's
    option overrides): DuckDB's insert and ours give the same codec, the same row groups (DuckDB closes a group at
    the 2048-row chunk reaching 3000) and files of about the same sizes."""
    _duck(lake, "CALL lake.set_option('data_inlining_row_limit', 0)",
          "CREATE TABLE lake.theirs (a BIGINT, b VARCHAR)", "CREATE TABLE lake.ours (a BIGINT, b VARCHAR)",
          "CALL lake.set_option('parquet_compression', 'gzip', schema => 'main')",
          *[f"CALL lake.set_option('{k}', {v}, table_name => '{t}')" for t in ("theirs", "ours")
            for k, v in (("parquet_compression", "'zstd'"), ("parquet_row_group_size", 3000),
                         ("target_file_size", "'100KB'"))],
          f"INSERT INTO lake.theirs SELECT i, 'v' || (i * 7919 % 100003) FROM range({ROWS}) r(i)")
    state = lake.snapshot()
    info = state.table("main", "ours")
    options = lake.write_options(info)
    assert options == WriteOptions(compression="zstd", row_group_size=3000, target_file_size=100_000)
    with lake.transaction() as tx:
        tx.add_data_files("main", "ours", write_data_files(info, state.table_path(info), _rows(ROWS), options=options))
    theirs, ours = _files(str(tmp_path / "data/main/theirs")), _files(str(tmp_path / "data/main/ours"))
    assert [_layout(m) for m in ours] == [_layout(m) for m in theirs] == [
        ("ZSTD", [4096] * 9), ("ZSTD", [4096] * 3 + [848])]
    sizes = [os.path.getsize(f) for f in sorted(glob.glob(f"{tmp_path}/data/main/*/*.parquet"))]
    assert all(s < 200_000 for s in sizes)
    for m_ours, m_theirs in zip(ours, theirs, strict=True):  # the same rows, the same codec: sizes within a quarter
        assert abs(m_ours.serialized_size - m_theirs.serialized_size) < m_theirs.serialized_size
    assert _duck(lake, "SELECT count(*), sum(a), count(DISTINCT b) FROM lake.ours") == \
        _duck(lake, "SELECT count(*), sum(a), count(DISTINCT b) FROM lake.theirs")


def test_defaults_and_precedence(lake: DuckLake) -> None:
    """Unset: DuckDB's defaults (snappy, 122,880-row groups, 512 MiB files); the lake's option, then the schema's,
    then the table's win, as DuckDB resolves them."""
    with lake.transaction() as tx:
        tx.create_table("main", "t", [Column(0, "a", "int32")])
    info = lake.snapshot().table("main", "t")
    assert lake.write_options(info) == WriteOptions()
    assert WriteOptions().row_group_size == 122_880 and WriteOptions().target_file_size == 1 << 29
    lake.set_option("parquet_compression", "gzip")
    lake.set_option("parquet_version", "2")
    assert lake.write_options(info) == WriteOptions(compression="gzip", parquet_version=2)
    lake.set_option("parquet_compression", "lz4", schema_id=info.schema_id)
    assert lake.write_options(info).compression == "lz4"
    lake.set_option("parquet_compression", "uncompressed", table_id=info.table_id)
    lake.set_option("parquet_row_group_size_bytes", "1MB", table_id=info.table_id)
    assert lake.write_options(info) == WriteOptions(compression="uncompressed", parquet_version=2,
                                                    row_group_size_bytes=1_000_000)


def test_table_options_are_the_rows_set_option_writes(lake: DuckLake) -> None:
    """Options staged in a transaction land as DuckDB's set_option(..., table_name => ...) stores them, and a bad
    value is refused before anything is staged."""
    with lake.transaction() as tx:
        for name in ("t", "u"):
            tx.create_table("main", name, [Column(0, "a", "int32")])
    with lake.transaction() as tx:
        tx.set_table_options("main", "t", {"parquet_compression": "ZSTD", "parquet_version": 2,
                                           "target_file_size": "1MB", "parquet_row_group_size": 1000})
        assert tx.write_options(tx.table("main", "t")).compression == "zstd"
        with pytest.raises(ValueError, match="parquet_compression 'lzo' is not a codec"):
            tx.set_table_options("main", "t", {"parquet_compression": "lzo"})
    state = lake.snapshot()
    ids = {n: state.table("main", n).table_id for n in ("t", "u")}
    rows = _duck(lake, *[f"CALL lake.set_option('{k}', {v}, table_name => 'u')" for k, v in (
        ("parquet_compression", "'ZSTD'"), ("parquet_version", 2), ("target_file_size", "'1MB'"),
        ("parquet_row_group_size", 1000))],
        "SELECT key, value, scope, scope_id FROM __ducklake_metadata_lake.ducklake_metadata "
        "WHERE scope = 'table' ORDER BY scope_id, key")
    assert [r[:3] for r in rows if r[3] == ids["t"]] == [r[:3] for r in rows if r[3] == ids["u"]]
    assert len([r for r in rows if r[3] == ids["t"]]) == 4


SORTS = ["a DESC NULLS FIRST, lower(b), c ASC NULLS LAST", '"b" DESC, a+1']


def _sort_rows(lake: DuckLake) -> list[list[tuple]]:
    with reference.attached(lake.db.location, read_only=True) as con:
        return [con.execute(f"SELECT * FROM __ducklake_metadata_lake.{t} ORDER BY ALL").fetchall() for t in (
            "ducklake_sort_info", "ducklake_sort_expression", "ducklake_snapshot_changes", "ducklake_schema_versions")
        ] + [con.execute("SELECT snapshot_id, schema_version, next_catalog_id, next_file_id "
                         "FROM __ducklake_metadata_lake.ducklake_snapshot ORDER BY ALL").fetchall()]


def test_sorted_by_writes_the_catalog_rows_duckdb_writes(tmp_path: Path) -> None:
    """SET SORTED BY twice, in a transaction that creates the table and in one of its own, then RESET: the same
    sort_info, sort_expression, snapshot and change rows as DuckDB's ALTER TABLE ... SET SORTED BY."""
    theirs = DuckLake.create(str(tmp_path / "r.ducklake"), str(tmp_path / "rdata"))
    ours = DuckLake.create(str(tmp_path / "o.ducklake"), str(tmp_path / "odata"))
    with reference.attached(theirs.db.location) as con:
        con.execute("BEGIN")
        con.execute("CREATE TABLE lake.t (a INT, b VARCHAR, c DATE)")
        con.execute(f"ALTER TABLE lake.t SET SORTED BY ({SORTS[0]})")
        con.execute("COMMIT")
        con.execute(f"ALTER TABLE lake.t SET SORTED BY ({SORTS[1]})")
        con.execute("ALTER TABLE lake.t RESET SORTED BY")
    with ours.transaction() as tx:
        tx.create_table("main", "t", [Column(0, "a", "int32"), Column(0, "b", "varchar"), Column(0, "c", "date")])
        tx.set_sorted_by("main", "t", [SORTS[0]])
    with ours.transaction() as tx:
        tx.set_sorted_by("main", "t", SORTS[1].split(", "))
    assert ours.snapshot().table("main", "t").sort.fields[1].expression == "(a + 1)"
    with ours.transaction() as tx:
        tx.set_sorted_by("main", "t", None)
    assert _sort_rows(ours) == _sort_rows(theirs)
    for lake in (ours, theirs):
        lake.close()


def test_restating_the_layout_stages_nothing(lake: DuckLake) -> None:
    """A model restates its layout on every run: what the table already has is not staged again (no snapshot)."""
    with lake.transaction() as tx:
        tx.create_table("main", "t", [Column(0, "a", "int32")])
        tx.set_layout("main", "t", "a DESC", {"parquet_compression": "zstd"})
    before = lake.latest_snapshot().snapshot_id
    with lake.transaction() as tx:
        tx.set_layout("main", "t", ["\"a\" desc"], {"parquet_compression": "ZSTD"})
        assert tx.is_empty
    assert lake.latest_snapshot().snapshot_id == before
    assert lake.table_options(lake.snapshot().table("main", "t").table_id) == {"parquet_compression": "zstd"}


def test_unknown_sort_column_is_refused_lake_unchanged(lake: DuckLake) -> None:
    with lake.transaction() as tx:
        tx.create_table("main", "t", [Column(0, "a", "int32"), Column(0, "b", "varchar")])
    before = lake.latest_snapshot().snapshot_id
    refused = r"sorted_by names columns table main.t does not have: zz \(its columns: a, b\)"
    with pytest.raises(ValueError, match=refused), lake.transaction() as tx:
        tx.set_sorted_by("main", "t", ["a", "lower(zz) DESC"])
    assert lake.latest_snapshot().snapshot_id == before
    assert lake.snapshot().table("main", "t").sort is None


def _in_order(path: str) -> list[tuple]:
    t = pq.read_table(path, columns=["a", "b"])
    return list(zip(t.column("a").to_pylist(), t.column("b").to_pylist(), strict=True))


def test_writes_and_compaction_sort_as_duckdb_does(lake: DuckLake, tmp_path: Path) -> None:
    """A table DuckDB sorted: our insert's file is in the sort order DuckDB's own insert gives the same rows; our
    merge_adjacent_files writes the merged file in that order too (row ids kept), and DuckDB reads the rows."""
    sort = "b DESC NULLS FIRST, a"
    data = pa.table({"a": pa.array([5, 3, None, 1, 4, 2], pa.int64()), "b": ["x", None, "y", "x", None, "y"]})
    values = ", ".join(f"({'NULL' if a is None else a}, {'NULL' if b is None else repr(b)})"
                       for a, b in zip(data.column("a").to_pylist(), data.column("b").to_pylist(), strict=True))
    _duck(lake, "CALL lake.set_option('data_inlining_row_limit', 0)", "CREATE TABLE lake.t (a BIGINT, b VARCHAR)",
          f"ALTER TABLE lake.t SET SORTED BY ({sort})", f"INSERT INTO lake.t VALUES {values}")
    (theirs,) = glob.glob(f"{tmp_path}/data/main/t/*.parquet")
    state = lake.snapshot()
    info = state.table("main", "t")
    with lake.transaction() as tx:
        (spec,) = write_data_files(info, state.table_path(info), data, options=lake.write_options(info))
        tx.add_data_files("main", "t", [spec])
    in_order = [(3, None), (4, None), (2, "y"), (None, "y"), (1, "x"), (5, "x")]
    assert _in_order(spec.path) == _in_order(theirs) == in_order
    before = _duck(lake, "SELECT rowid, a, b FROM lake.t ORDER BY rowid")
    assert merge_adjacent_files(lake, "main", "t") == [("main", "t", 2, 1)]
    (merged,) = lake.snapshot().files(lake.snapshot().table("main", "t"))
    assert _in_order(merged.path) == [r for r in in_order for _ in (0, 1)]
    assert _duck(lake, "SELECT rowid, a, b FROM lake.t ORDER BY rowid") == before
