"""A model's layout through dbt: `sorted_by` and the Parquet write options become the table's SET SORTED BY and table
options in the catalog (as DuckDB records them), Spark's files follow them (codec, row groups, rows sorted in each
file), a sort DuckDB set is honoured by our MERGE, and a bad key is refused."""

from __future__ import annotations

import glob

import pyarrow.parquet as pq
import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.write import local_write
from tests.support import reference

SORTED = """{{ config(materialized='table', sorted_by=['k desc nulls first', 'id'], parquet_compression='zstd',
                      parquet_row_group_size=4096, parquet_version=2) }}
select id, case when id % 7 = 0 then null else id % 13 end as k from range(20000)
"""
MERGED = """{{ config(materialized='incremental', unique_key='id') }}
select id, cast(id * {{ var('m', 1) }} as bigint) as v from range({{ var('n', 300) }})
"""
BAD = "{{ config(materialized='table', sorted_by='nope desc') }}\nselect 1 as id\n"


def _files(data_path: str, schema: str, table: str) -> list[str]:
    return sorted(glob.glob(f"{data_path}/{schema}/{table}/*.parquet"))


def _column(path: str, name: str) -> list:
    return pq.read_table(path, columns=[name]).column(0).to_pylist()


@pytest.fixture(scope="module", autouse=True)
def _spark_writes() -> object:
    # small results are written by the driver (exact layout, tested in tests/lake); here Spark writes them
    saved, local_write.SMALL_RESULT_BYTES = local_write.SMALL_RESULT_BYTES, -1
    yield
    local_write.SMALL_RESULT_BYTES = saved


class TestTableLayout:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"sorted_t.sql": SORTED, "merged.sql": MERGED}

    def test_layout_from_model_config(self, project: object) -> None:
        creds = project.adapter.config.credentials  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        data_path = creds.data_path.rstrip("/")
        run_dbt(["run"])
        ours = _files(data_path, schema, "sorted_t")
        with reference.attached(creds.catalog) as con:
            # a sort DuckDB sets on a table our model does not sort: our MERGE's new rows follow it
            con.execute(f"ALTER TABLE lake.{schema}.merged SET SORTED BY (v DESC, id)")
            # DuckDB's own insert of the same rows into the table our model laid out: the file to compare ours with
            con.execute(f"INSERT INTO lake.{schema}.sorted_t SELECT i, CASE WHEN i % 7 = 0 THEN NULL ELSE i % 13 END "
                        "FROM range(20000) r(i)")
        (theirs,) = set(_files(data_path, schema, "sorted_t")) - set(ours)
        run_dbt(["run", "--select", "merged", "--vars", '{"m": 3, "n": 400}'])

        with reference.attached(creds.catalog, read_only=True) as con:
            ids = dict(con.execute("SELECT table_name, table_id FROM ducklake_table_info('lake')").fetchall())
            sorts = con.execute("SELECT i.table_id, e.sort_key_index, e.expression, e.dialect, e.sort_direction, "
                                "e.null_order FROM __ducklake_metadata_lake.ducklake_sort_info i JOIN "
                                "__ducklake_metadata_lake.ducklake_sort_expression e USING (sort_id) "
                                "WHERE i.end_snapshot IS NULL ORDER BY ALL").fetchall()
            options = con.execute("SELECT scope_id, key, value FROM __ducklake_metadata_lake.ducklake_metadata "
                                  "WHERE scope = 'table' ORDER BY ALL").fetchall()
            sorted_rows = con.execute(f"SELECT count(*), count(k), sum(k) FROM lake.{schema}.sorted_t").fetchone()
            merged_rows = con.execute(f"SELECT count(*), sum(v) FROM lake.{schema}.merged").fetchone()
            sort_changes = con.execute("SELECT count(*) FROM lake.snapshots() WHERE changes['tables_altered'] "
                                       "IS NOT NULL").fetchone()[0]
        assert sorts == sorted([
            (ids["sorted_t"], 0, "k", "duckdb", "DESC", "NULLS_FIRST"),
            (ids["sorted_t"], 1, "id", "duckdb", "ASC", "NULLS_LAST"),
            (ids["merged"], 0, "v", "duckdb", "DESC", "NULLS_LAST"),
            (ids["merged"], 1, "id", "duckdb", "ASC", "NULLS_LAST")])
        assert options == [(ids["sorted_t"], "parquet_compression", "zstd"),
                           (ids["sorted_t"], "parquet_row_group_size", "4096"),
                           (ids["sorted_t"], "parquet_version", "V2")]
        assert sorted_rows == (40000, 2 * (20000 - 2858), 2 * sum(i % 13 for i in range(20000) if i % 7))
        assert merged_rows == (400, 3 * sum(range(400)))
        assert sort_changes == 2  # sorted_t created sorted, DuckDB's ALTER (a model without sorted_by keeps it)

        # Spark's files and DuckDB's: the same codec, page encoding and row groups, the rows in the same order
        def layout(path: str) -> tuple[set, set, list[int]]:
            meta = pq.ParquetFile(path).metadata
            groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
            return ({g.column(0).compression for g in groups}, {e for g in groups for e in g.column(0).encodings},
                    [g.num_rows for g in groups])

        codecs, encodings, groups = layout(theirs)
        assert (codecs, groups) == ({"ZSTD"}, [4096] * 4 + [3616])
        assert len(ours) == 1  # one order over the write: Spark coalesced its range partitions of 20,000 rows
        mine = layout(ours[0])
        assert mine[:2] == (codecs, encodings)
        assert mine[2] == groups
        for path in (ours[0], theirs):
            keys = list(zip(_column(path, "k"), _column(path, "id"), strict=True))
            assert keys == sorted(keys, key=lambda r: (r[0] is not None, -(r[0] or 0), r[1])), path

        lake = DuckLake.open(creds.catalog)
        try:
            state = lake.snapshot()
            new = [f.path for f in state.files(state.table(schema, "merged"))
                   if f.begin_snapshot == state.snapshot_id]
        finally:
            lake.close()
        assert new  # the MERGE's files: updated and inserted rows, each file in DuckDB's order
        for path in new:
            keys = list(zip(_column(path, "v"), _column(path, "id"), strict=True))
            assert keys == sorted(keys, key=lambda r: (-r[0], r[1])), path

    def test_unknown_sort_column_is_refused(self, project: object) -> None:
        creds = project.adapter.config.credentials  # type: ignore[attr-defined]
        with reference.attached(creds.catalog, read_only=True) as con:
            before = con.execute("SELECT snapshot_id, changes FROM lake.snapshots()").fetchall()
        import os

        model = os.path.join(project.project_root, "models", "bad.sql")  # type: ignore[attr-defined]
        with open(model, "w") as f:
            f.write(BAD)
        try:
            results = run_dbt(["run", "--select", "bad"], expect_pass=False)
        finally:
            os.remove(model)
        message = results.results[0].message or ""
        assert "sorted_by names columns table" in message and "nope" in message and "(its columns: id)" in message
        with reference.attached(creds.catalog, read_only=True) as con:
            assert con.execute("SELECT snapshot_id, changes FROM lake.snapshots()").fetchall() == before


SEED_ROWS = "id,k,s\n" + "".join(f"{i},{'' if i % 11 == 0 else (i * 7919) % 101},s{i % 37}\n" for i in range(5000))
SEED_LAYOUT = {"+sorted_by": ["k desc nulls first", "id"], "+parquet_compression": "zstd",
               "+parquet_row_group_size": 2048, "+parquet_version": 2}


class TestSeedLayout:
    """A seed's `sorted_by` and write options, as a model's: the catalog's sort rows and table options, and files
    laid out and sorted as DuckDB's insert of the same rows into a table DuckDB gave the same layout. `drv` is
    written by the driver (dbt's inferred types), `spk` by Spark (a column_types override Spark casts)."""

    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {"drv.csv": SEED_ROWS, "spk.csv": SEED_ROWS}

    @pytest.fixture(scope="class")
    def project_config_update(self) -> dict[str, object]:
        return {"seeds": {"test": {"drv": SEED_LAYOUT, "spk": {**SEED_LAYOUT, "+column_types": {"id": "long"}}}}}

    def test_seed_layout_is_duckdbs(self, project: object) -> None:
        creds = project.adapter.config.credentials  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        data_path = creds.data_path.rstrip("/")
        md = "__ducklake_metadata_lake"
        run_dbt(["seed"])
        ours = {seed: _files(data_path, schema, seed) for seed in ("drv", "spk")}
        with reference.attached(creds.catalog) as con:
            con.execute("SET threads = 1")  # one insert, one file, chunks in order
            for seed in ("drv", "spk"):
                twin = f"lake.{schema}.{seed}_duck"
                con.execute(f"CREATE TABLE {twin} AS SELECT * FROM lake.{schema}.{seed} LIMIT 0")
                con.execute(f"ALTER TABLE {twin} SET SORTED BY (k DESC NULLS FIRST, id)")
                for key, value in (("parquet_compression", "'zstd'"), ("parquet_row_group_size", 2048),
                                   ("parquet_version", 2)):
                    con.execute(f"CALL lake.set_option('{key}', {value}, schema => '{schema}', "
                                f"table_name => '{seed}_duck')")
                con.execute(f"INSERT INTO {twin} SELECT * FROM lake.{schema}.{seed}")
        with reference.attached(creds.catalog, read_only=True) as con:
            names = dict(con.execute("SELECT table_id, table_name FROM ducklake_table_info('lake')").fetchall())
            sorts = con.execute(f"SELECT i.table_id, e.sort_key_index, e.expression, e.dialect, e.sort_direction, "
                                f"e.null_order FROM {md}.ducklake_sort_info i JOIN {md}.ducklake_sort_expression e "
                                "USING (sort_id) WHERE i.end_snapshot IS NULL ORDER BY ALL").fetchall()
            options = con.execute(f"SELECT scope_id, key, value FROM {md}.ducklake_metadata WHERE scope = 'table' "
                                  "ORDER BY ALL").fetchall()
        by_table: dict[str, tuple[list, list]] = {}
        for table_id, name in names.items():
            by_table[name] = ([r[1:] for r in sorts if r[0] == table_id], [r[1:] for r in options if r[0] == table_id])
        for seed in ("drv", "spk"):
            assert by_table[seed] == by_table[f"{seed}_duck"], seed
            assert by_table[seed][0] == [(0, "k", "duckdb", "DESC", "NULLS_FIRST"), (1, "id", "duckdb", "ASC",
                                                                                      "NULLS_LAST")]
            (mine,), (theirs,) = ours[seed], _files(data_path, schema, f"{seed}_duck")
            for name in ("k", "id", "s"):
                assert _column(mine, name) == _column(theirs, name), (seed, name)
            meta, ref = pq.ParquetFile(mine).metadata, pq.ParquetFile(theirs).metadata
            assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == \
                [ref.row_group(i).num_rows for i in range(ref.num_row_groups)] == [2048, 2048, 904], seed
            assert {meta.row_group(0).column(i).compression for i in range(3)} == {"ZSTD"}
