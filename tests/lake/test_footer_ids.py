"""Field ids set by rewriting a Parquet footer: a file of a foreign writer (no ids on nested nodes) carrying row ids is
read by DuckDB by field id, rowid included; a file of another shape is refused and left as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake, storage
from dbt.adapters.ducklake.lake.errors import InvalidDataFileError
from dbt.adapters.ducklake.lake.paths import data_file_name, join_path
from dbt.adapters.ducklake.lake.read.deletes import ROW_ID_COLUMN
from dbt.adapters.ducklake.lake.write.datafiles import describe_parquet, read_footer
from dbt.adapters.ducklake.lake.write.footer_ids import label_field_ids
from tests.support import reference, s3
from tests.support.invariants import violations

COLUMNS = [
    Column(0, "id", "int32"),
    Column(0, "tags", "list", children=(Column(0, "element", "varchar"),)),
    Column(0, "m", "map", children=(Column(0, "key", "varchar", nullable=False), Column(0, "value", "int64"))),
    Column(0, "s", "struct", children=(Column(0, "l", "list", children=(Column(0, "element", "int64"),)),
                                       Column(0, "x", "int64"))),
]
ROWS = pa.table({
    "id": pa.array([7, 8], pa.int32()),
    "tags": [["a", None], []],
    "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
    "s": [{"l": [1, 2], "x": 3}, {"l": None, "x": None}],
    ROW_ID_COLUMN: pa.array([1, 0], pa.int64()),  # an UPDATE's post-images keep the rows' ids
})


def _node_ids(fields: object, path: str = "") -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for f in fields:  # type: ignore[attr-defined]
        meta = f.metadata or {}
        out[path + f.name] = int(meta[b"PARQUET:field_id"]) if b"PARQUET:field_id" in meta else None
        t = f.type
        kids = ([t.key_field, t.item_field] if pa.types.is_map(t) else [t.value_field] if pa.types.is_list(t)
                else list(t) if pa.types.is_struct(t) else [])
        out.update(_node_ids(kids, f"{path}{f.name}."))
    return out


def test_a_labelled_file_is_read_by_field_id_with_its_row_ids(tmp_path: object) -> None:
    url = f"duckdb:///{tmp_path}/m.ducklake"
    lake = DuckLake.create(url, f"{tmp_path}/data/")
    with lake.transaction() as tx:
        tx.create_table("main", "t", COLUMNS)
    state = lake.snapshot()
    table = state.table("main", "t")
    path = join_path(state.table_path(table), data_file_name())
    os.makedirs(os.path.dirname(path))
    pq.write_table(ROWS, path)  # no field id on any node, as a foreign writer's
    assert set(_node_ids(pq.read_schema(path)).values()) == {None}
    label_field_ids(path, table.columns)
    ids = {c.name: c.column_id for c in table.columns}
    assert _node_ids(pq.read_schema(path)) == {
        "id": ids["id"], "tags": ids["tags"], "tags.element": ids["tags"] + 1, "m": ids["m"], "m.key": ids["m"] + 1,
        "m.value": ids["m"] + 2, "s": ids["s"], "s.l": ids["s"] + 1, "s.l.element": ids["s"] + 2,
        "s.x": ids["s"] + 3, ROW_ID_COLUMN: 2147483540}
    assert pq.read_table(path).equals(ROWS)  # the data is as it was; only the footer changed
    spec = describe_parquet(path, table.columns)  # by field id: every top-level column has one now
    assert spec.has_row_ids and spec.name_mapping is None
    with lake.transaction() as tx:
        tx.add_data_files("main", "t", [spec])
    lake.close()
    with reference.attached(url, read_only=True) as con:
        got = con.execute("SELECT rowid, * FROM lake.t ORDER BY rowid").fetchall()
    assert got == [(0, 8, [], None, {"l": None, "x": None}), (1, 7, ["a", None], {"k": 1}, {"l": [1, 2], "x": 3})]
    assert violations(url) == []


def test_an_object_on_s3_is_written_again_labelled(s3_server: s3.S3Server) -> None:
    columns = [Column(i + 1, c.name, c.type, children=c.children) for i, c in enumerate(COLUMNS)]
    storage.configure_object_store(storage.ObjectStoreConfig(
        key_id=s3_server.key_id, secret=s3_server.secret, region=s3_server.region, endpoint=s3_server.endpoint,
        url_style="path", use_ssl=False))
    try:
        path = f"s3://{s3_server.make_bucket()}/t/data.parquet"
        with storage.file_io(path).open_output(path) as out:
            pq.write_table(ROWS, out)
        label_field_ids(path, columns)
        footer = read_footer(path)
        assert footer.file_size == storage.file_io(path).size(path)
        assert _node_ids(footer.schema)["tags"] == 2 and _node_ids(footer.schema)[ROW_ID_COLUMN] == 2147483540
        with storage.file_io(path).open_input(path) as f:
            assert pq.read_table(f).equals(ROWS)
    finally:
        storage.configure_object_store(storage.ObjectStoreConfig())


def test_a_file_of_another_shape_is_refused_and_left_as_it_was(tmp_path: object) -> None:
    table_columns = [Column(i + 1, c.name, c.type, children=c.children) for i, c in enumerate(COLUMNS)]
    extra = f"{tmp_path}/extra.parquet"
    pq.write_table(ROWS.append_column("zz", pa.array([1, 2])), extra)
    flat = f"{tmp_path}/flat.parquet"
    pq.write_table(ROWS.set_column(1, "tags", pa.array(["a", "b"])), flat)
    text = f"{tmp_path}/text.parquet"
    Path(text).write_bytes(b"not parquet at all")
    for path, message in ((extra, "file column 'zz' matches no column of the table"),
                          (flat, "file column tags is not a list as the table's"),
                          (text, "not a plain Parquet file")):
        before = Path(path).read_bytes()
        with pytest.raises(InvalidDataFileError, match=message):
            label_field_ids(path, table_columns)
        assert Path(path).read_bytes() == before
