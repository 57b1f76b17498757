"""The catalog's rows: the staged view validates without a catalog, each catalog table has one writer, and a commit's
statements are the ones the builder wrote before it was split into the view and the writer (a golden record).

The golden files (tests/data/catalog_rows_<backend>.json) hold every statement the commits of `_scenario` run, with
what differs between runs (uuids, times, the temporary directory) replaced by placeholders. Regenerate them only for
a deliberate change of the rows: DUCKLAKE_WRITE_GOLDEN=1 pytest tests/lake/test_catalog_rows.py.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake.catalog import database as catalog_module
from dbt.adapters.ducklake.lake.errors import (
    NoSuchSchemaError,
    NoSuchTableError,
    SchemaEvolutionError,
    SchemaExistsError,
    TableExistsError,
)
from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.read.arrow_types import plain_type
from dbt.adapters.ducklake.lake.records import Column, TableInfo
from dbt.adapters.ducklake.lake.write import operations as ops
from dbt.adapters.ducklake.lake.write.catalog_view import CatalogView
from dbt.adapters.ducklake.lake.write.writer import write_data_files

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dbt" / "adapters" / "ducklake"
GOLDEN = ROOT / "tests" / "data"

COLUMNS = [
    Column(0, "id", "int64", nullable=False),
    Column(0, "name", "varchar"),
    Column(0, "part", "int32"),
    Column(0, "info", "struct", children=(Column(0, "a", "int32"), Column(0, "b", "varchar"))),
]


def _rows(table: TableInfo, start: int, count: int) -> pa.Table:
    names = {c.name for c in table.columns}
    rows = [{"id": i, "name": f"n{i}", "part": i % 2, "info": {"a": i, "b": None}, "extra": i * 10,
             "label": f"n{i}"} for i in range(start, start + count)]
    rows = [{k: v for k, v in r.items() if k in names} for r in rows]
    return pa.Table.from_pylist(rows, schema=pa.schema([pa.field(c.name, plain_type(c)) for c in table.columns]))


def _append(lake: DuckLake, tx: Any, schema: str, name: str, start: int, count: int) -> None:
    table = tx.table(schema, name)
    tx.add_data_files(schema, name, write_data_files(table, tx.table_path(table), _rows(table, start, count)))


def _positions(lake: DuckLake, schema: str, name: str, ids: set[int]) -> dict[int, list[int]]:
    state = lake.snapshot()
    out: dict[int, list[int]] = {}
    for f in sorted(state.files(state.table(schema, name)), key=lambda f: f.data_file_id):
        hits = [p for p, v in enumerate(pq.read_table(f.path).column("id").to_pylist()) if v in ids]
        if hits:
            out[f.data_file_id] = hits
    return out


def _scenario(lake: DuckLake) -> None:
    """A representative set of commits: DDL of every kind, tags, data files, deletes, renames, a clone, drops."""
    with lake.transaction(author="tests", commit_message="create") as tx:
        tx.create_schema("s1")
        tx.create_table("s1", "t", COLUMNS, partition_by=[("part", "identity")], comment="a table")
        tx.create_view("s1", "v", "SELECT 1 AS x", column_aliases=["x"], comment="a view")
        tx.set_tag("s1", "t", "owner", "me")
        tx.set_comment("s1", "t", "the id", column="id")
        _append(lake, tx, "s1", "t", 0, 20)
        tx.create_schema("s2")
        tx.create_table("s2", "gone", COLUMNS[:2])
    with lake.transaction(commit_message="evolve") as tx:
        _append(lake, tx, "s1", "t", 20, 6)  # existing stats: the UPDATE path
        tx.add_column("s1", "t", Column(0, "extra", "int64", initial_default="7", default_value="7"))
        tx.rename_column("s1", "t", "name", "label")
        tx.alter_column_type("s1", "t", "part", "int64")
        tx.set_column_nullable("s1", "t", "label", False)
        tx.set_partitioning("s1", "t", [("part", "identity"), ("id", "bucket(4)")])
        tx.set_tag("s1", "v", "owner", "you")
    with lake.transaction(commit_message="delete") as tx:
        for fid, positions in _positions(lake, "s1", "t", {0, 2, 4}).items():
            tx.delete_rows("s1", "t", fid, positions)
        tx.drop_column("s1", "t", "info")  # in a transaction of its own, not with the appends above
    with lake.transaction(commit_message="delete again, rename") as tx:
        for fid, positions in _positions(lake, "s1", "t", {6, 8}).items():
            tx.delete_rows("s1", "t", fid, positions)  # a second delete file: the old one is replaced
        tx.rename_table("s1", "t", "t2")
        tx.rename_view("s1", "v", "v2")
        tx.set_tag("s1", "t2", "owner", None)
        tx.set_comment("s1", "t2", None, column="id")
        tx.set_partitioning("s1", "t2", None)
        tx.drop_column("s1", "t2", "extra")  # the highest id: a clone keeps it as a retired column row
    with lake.transaction(commit_message="clone, drops") as tx:
        tx.clone_table("s1", "t2", "s1", "c")  # the dropped column's id is kept as a retired column row
        tx.drop_view("s1", "v2")
        tx.drop_schema("s2", cascade=True)
    with lake.transaction(commit_message="more") as tx:
        _append(lake, tx, "s1", "c", 100, 3)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class _Normaliser:
    """Statements as JSON values, with uuids numbered by first appearance, times and the temp directory replaced."""

    def __init__(self, tmp: str) -> None:
        self.tmp = tmp
        self.uuids: dict[str, int] = {}

    def value(self, v: Any) -> Any:
        if isinstance(v, dt.datetime):
            return "<time>"
        if isinstance(v, uuid.UUID):
            v = str(v)
        if isinstance(v, str):
            v = v.replace(self.tmp, "<tmp>")
            if "+00" in v and re.match(r"\d{4}-\d\d-\d\d \d", v):  # SQLite's text timestamps
                return "<time>"
            return _UUID.sub(lambda m: f"<uuid{self.uuids.setdefault(m.group(0), len(self.uuids))}>", v)
        return v

    def params(self, params: Any) -> Any:
        if isinstance(params, dict):
            out = {k: self.value(v) for k, v in params.items()}
            if "did" in out:  # a delete file holds its data file's path: its size follows the temp directory's
                out.update(size="<size>", footer="<size>")
            return out
        if isinstance(params, list):
            return [self.params(p) for p in params]
        return params


def _record(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    url = {"duckdb": f"duckdb:///{tmp_path}/metadata.ducklake", "sqlite": f"sqlite:///{tmp_path}/metadata.sqlite"}
    data = tmp_path / "data"
    data.mkdir()
    lake = DuckLake.create(url[backend], str(data) + "/")
    norm = _Normaliser(str(tmp_path))
    out: list[list[Any]] = []
    original = catalog_module.CatalogDB.execute

    def execute(self: Any, conn: Any, sql: str, params: Any = None) -> None:
        out.append([sql, norm.params(params)])
        original(self, conn, sql, params)

    monkeypatch.setattr(catalog_module.CatalogDB, "execute", execute)
    _scenario(lake)
    return out


@pytest.mark.parametrize("backend", ["duckdb", "sqlite"])
def test_commit_statements_unchanged(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = _record(backend, tmp_path, monkeypatch)
    golden = GOLDEN / f"catalog_rows_{backend}.json"
    if os.environ.get("DUCKLAKE_WRITE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=1) + "\n")
    expected = json.loads(golden.read_text())
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g == e, f"statement {i} differs"


# (a) the staged view -----------------------------------------------------------------------------------------------
@pytest.fixture
def lake(tmp_path: Path) -> DuckLake:
    data = tmp_path / "data"
    data.mkdir()
    lake = DuckLake.create(f"sqlite:///{tmp_path}/metadata.sqlite", str(data) + "/")
    with lake.transaction() as tx:
        tx.create_schema("s")
        tx.create_table("s", "t", COLUMNS, partition_by=[("part", "identity")])
    return lake


def _refuse_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, every way into the catalog raises."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the staged view touched the catalog")

    for name in ("query", "execute", "read", "write"):
        monkeypatch.setattr(catalog_module.CatalogDB, name, refuse)


def test_staged_view_validates_without_a_catalog(lake: DuckLake, monkeypatch: pytest.MonkeyPatch) -> None:
    state = lake.snapshot()
    _refuse_catalog(monkeypatch)
    view = CatalogView(state)
    assert not hasattr(view, "conn") and not hasattr(view, "db") and view.reader is None
    staged: list[ops.DdlOperation] = [
        ops.AddSchema("s2"),
        ops.AddTable("s2", "n", tuple(COLUMNS[:2]), partition=(("id", "bucket(2)"),), comment="new"),
        ops.AddColumn("s", "t", Column(0, "extra", "int64")),
        ops.AlterColumn("s", "t", "name", new_name="label"),
        ops.AlterColumn("s", "t", "part", new_type="int64"),
        ops.RemoveColumn("s", "t", "info"),
        ops.SetComment("s", "t", "c", column="id"),
        ops.SetTag("s", "t", "owner", "me"),
        ops.AddView("s", "v", "SELECT 1", column_aliases=("x",)),
        ops.RenameView("s", "v", "v2"),
        ops.RenameTable("s", "t", "t2"),
        ops.SetPartitioning("s", "t2", (("part", "identity"), ("id", "bucket(4)"))),
        ops.RemoveSchema("s2", cascade=True),
    ]
    for op in staged:
        op.apply(view)
    t2 = view.table("s", "t2")
    assert [c.name for c in t2.columns] == ["id", "label", "part", "extra"]
    assert t2.column("extra").column_id == 7 and t2.column("part").type == "int64"
    assert t2.partition is not None and len(t2.partition.fields) == 2
    assert view.view("s", "v2").column_aliases == '"x"'
    assert "s2" not in view.schemas and view.snapshot_id == state.snapshot_id + 1
    # (as the builder has always had it: the altered id of s2.n stays after the cascade drops it)
    assert view.changes.render() == (
        'created_view:"s"."v",created_view:"s"."v2",created_table:"s"."t2",altered_table:2,altered_table:5')
    bad: list[tuple[ops.DdlOperation, type[Exception]]] = [
        (ops.AddSchema("s"), SchemaExistsError),
        (ops.AddTable("s", "T2", tuple(COLUMNS)), TableExistsError),
        (ops.AddTable("nope", "x", tuple(COLUMNS)), NoSuchSchemaError),
        (ops.RemoveTable("s", "t"), NoSuchTableError),
        (ops.RemoveColumn("s", "t2", "part"), SchemaEvolutionError),
        (ops.AlterColumn("s", "t2", "label", new_type="int32"), SchemaEvolutionError),
        (ops.RemoveSchema("s"), SchemaExistsError),
    ]
    for op, error in bad:
        with pytest.raises(error):
            op.apply(view)


def test_transaction_stages_without_a_catalog(lake: DuckLake, monkeypatch: pytest.MonkeyPatch) -> None:
    tx = lake.transaction()  # reads its base snapshot; staging reads one thing more:
    tx.add_column("s", "t", Column(0, "extra", "int64"))  # the highest column id the table ever had (ColumnIdReader)
    _refuse_catalog(monkeypatch)
    tx.rename_table("s", "t", "t2")
    tx.create_view("s", "v", "SELECT 1")
    with pytest.raises(TableExistsError):
        tx.create_view("s", "t2", "SELECT 2")
    assert tx.table("s", "t2").column("extra").column_id == 7
    tx.drop_view("s", "v")  # unstaged: the staged view is rebuilt, again without a catalog
    assert tx.table("s", "t2").name == "t2"
    tx.abandon()


# (b) one writer per catalog table ----------------------------------------------------------------------------------
CATALOG_TABLES = [
    "ducklake_snapshot", "ducklake_snapshot_changes", "ducklake_schema", "ducklake_table", "ducklake_column",
    "ducklake_view", "ducklake_tag", "ducklake_column_tag", "ducklake_partition_info", "ducklake_partition_column",
    "ducklake_schema_versions", "ducklake_table_stats", "ducklake_table_column_stats", "ducklake_inlined_data_tables",
    "ducklake_view_column_tag", "ducklake_sort_info", "ducklake_sort_expression",
]
FILE_TABLES = [
    "ducklake_data_file", "ducklake_delete_file", "ducklake_file_column_stats", "ducklake_file_partition_value",
    "ducklake_files_scheduled_for_deletion", "ducklake_column_mapping", "ducklake_name_mapping",
]
_WRITE = re.compile(r"^\s*(INSERT INTO|UPDATE) \{p\}(\w*)", re.IGNORECASE)
# statements whose table is not spelled out: each inlined-data table's own rows (not a catalog table of the lists),
# and the DuckDB catalog's rewrite of the writers' many-row INSERTs as INSERT ... SELECT from Arrow
DYNAMIC_WRITERS = {("lake/write/operations.py", "DeleteInlinedRows.apply"), ("lake/catalog/arrow_insert.py", "rewrite"),
                   ("lake/write/inlined_rows.py", "row_statements")}


def _writers() -> tuple[dict[tuple[str, str], set[tuple[str, str]]], set[tuple[str, str]]]:
    """{(table, INSERT|UPDATE): {(module, function)}} of the statements spelled out in the package's source, and the
    (module, function)s of statements whose table is computed."""
    static: dict[tuple[str, str], set[tuple[str, str]]] = {}
    dynamic: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = str(path.relative_to(PACKAGE))
        tree = ast.parse(path.read_text())

        def visit(node: ast.AST, scope: str, module: str = module) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    visit(child, f"{scope}.{child.name}" if scope else child.name)
                    continue
                if isinstance(child, ast.JoinedStr) and child.values:
                    first = child.values[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        m = _WRITE.match(first.value)
                        if m and (not m.group(2) or len(child.values) > 1 and not m.group(2).startswith("ducklake_")):
                            dynamic.add((module, scope))
                        elif m:
                            static.setdefault((m.group(2), m.group(1).upper()), set()).add((module, scope))
                    continue
                if isinstance(child, ast.Constant) and isinstance(child.value, str):
                    m = _WRITE.match(child.value)
                    if m:
                        static.setdefault((m.group(2), m.group(1).upper()), set()).add((module, scope))
                visit(child, scope)

        visit(tree, "")
    return static, dynamic


def test_each_catalog_table_has_one_writer() -> None:
    static, dynamic = _writers()
    assert dynamic <= DYNAMIC_WRITERS, f"statements whose table is computed: {sorted(dynamic - DYNAMIC_WRITERS)}"
    for table in CATALOG_TABLES + FILE_TABLES:
        owner = "lake/write/catalog_rows.py" if table in CATALOG_TABLES else "lake/write/file_rows.py"
        found = {k: v for k, v in static.items() if k[0] == table}
        assert found, f"nothing writes {table}"
        for (_, verb), where in found.items():
            assert {m for m, _ in where} == {owner}, f"{verb} {table} outside {owner}: {sorted(where)}"
            assert len(where) == 1, f"{verb} {table} in more than one function: {sorted(where)}"
    # the statements of the one writer are the only ones that name these tables
    others = {k for k in static if k[0] not in CATALOG_TABLES + FILE_TABLES and k[0].startswith("ducklake_")}
    assert {t for t, _ in others} <= {"ducklake_metadata"}, sorted(others)
