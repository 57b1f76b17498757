"""dbt-databricks' MERGE options and the replace_where strategy, each run checked against DuckDB: after every run the
table DuckDB reads equals what DuckDB itself makes by running the equivalent MERGE INTO / DELETE + INSERT on a copy of
the lake as it was before the run; each model's run is one snapshot; bad configurations fail clearly and change
nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

COLUMNS = "id, val, ver, note"
# the model's rows per run (step); the same text is the MERGE source on DuckDB's side
ROWS = {
    0: [(1, "a", 1, "n0"), (2, "b", 1, "n0"), (3, "c", 1, "n0"), (4, "d", 1, "n0"), (5, "e", 1, "n0"),
        (6, "f", 1, "n0")],
    1: [(2, "b1", 2, "n1"), (3, "c1", 0, "n1"), (5, "e1", 2, "n1"), (7, "g1", 1, "n1"), (9, "i1", 0, "n1")],
}


def values(step: int) -> str:
    """The rows of a step as a query both Spark and DuckDB run."""
    rows = ", ".join(f"({i}, '{v}', {ver}, '{n}')" for i, v, ver, n in ROWS[step])
    return f"select * from (values {rows}) as s({COLUMNS})"


def model(config: str, where: str = "") -> str:
    branches = "".join(f"{{% {'if' if s == 0 else 'elif'} var('step', 0) == {s} %}}\n{values(s)}\n" for s in ROWS)
    return f"{{{{ config(materialized='incremental', {config}) }}}}\nselect * from (\n{branches}{{% endif %}}\n) " \
           f"as rows {where}\n"


SET_ALL = "val = s.val, ver = s.ver, note = s.note"
INSERT = f"INSERT ({COLUMNS}) VALUES (s.id, s.val, s.ver, s.note)"
# model -> (its config, the statements DuckDB runs for one incremental run: {t} the table, {s} the source query).
# DuckLake's MERGE in DuckDB takes one UPDATE or DELETE action, so a MERGE with a NOT MATCHED BY SOURCE action is two
# statements there: that action first (the target rows missing from the source), then the matched and new rows.
MODELS = {
    "by_source_delete": (
        "unique_key='id', not_matched_by_source_action='delete', target_alias='tgt', "
        "source_alias='src', matched_condition='src.ver > tgt.ver', merge_update_columns=['val', 'ver']",
        ["MERGE INTO {t} d USING ({s}) s ON s.id = d.id WHEN NOT MATCHED BY SOURCE THEN DELETE",
         "MERGE INTO {t} d USING ({s}) s ON s.id = d.id WHEN MATCHED AND s.ver > d.ver THEN UPDATE SET val = s.val, "
         f"ver = s.ver WHEN NOT MATCHED THEN {INSERT}"]),
    "by_source_condition": (
        "unique_key='id', not_matched_by_source_action='delete', "
        "not_matched_by_source_condition='DBT_INTERNAL_DEST.id % 2 = 0', "
        "incremental_predicates=['DBT_INTERNAL_DEST.id <> 5'], merge_exclude_columns=['val']",
        ["MERGE INTO {t} d USING ({s}) s ON d.id <> 5 AND s.id = d.id WHEN NOT MATCHED BY SOURCE AND d.id % 2 = 0 "
         "THEN DELETE",
         "MERGE INTO {t} d USING ({s}) s ON d.id <> 5 AND s.id = d.id WHEN MATCHED THEN UPDATE SET ver = s.ver, "
         f"note = s.note WHEN NOT MATCHED THEN {INSERT}"]),
    "skipped_steps": (
        "unique_key='id', skip_matched_step=true, not_matched_condition='DBT_INTERNAL_SOURCE.ver > 0', "
        "not_matched_by_source_action=\"update set note = 'gone'\"",
        ["MERGE INTO {t} d USING ({s}) s ON s.id = d.id WHEN NOT MATCHED BY SOURCE THEN UPDATE SET note = 'gone'",
         f"MERGE INTO {{t}} d USING ({{s}}) s ON s.id = d.id WHEN NOT MATCHED AND s.ver > 0 THEN {INSERT}"]),
    "replace_where": (
        "incremental_strategy='replace_where', incremental_predicates=['id >= 5', 'DBT_INTERNAL_DEST.ver >= 0']",
        ["DELETE FROM {t} WHERE id >= 5 AND ver >= 0", "INSERT INTO {t} SELECT * FROM ({s}) s WHERE id >= 5"]),
}
# a replace_where model's later rows are those its predicates replace
RW_WHERE = "{% if var('step', 0) > 0 %} where id >= 5{% endif %}"
# bad configurations: refused before anything is staged (the first run too), or, for a model row outside the
# replace_where predicates, when the INSERT meets it
BAD = {
    "bad_action": model("unique_key='id', not_matched_by_source_action='remove'"),
    "no_predicates": model("incremental_strategy='replace_where'"),
    "condition_alone": model("unique_key='id', not_matched_by_source_condition='DBT_INTERNAL_DEST.id > 1'"),
    "nothing_to_do": model("unique_key='id', skip_matched_step=true, skip_not_matched_step=true"),
    "action_without_key": model("incremental_strategy='merge', not_matched_by_source_action='delete'"),
    "action_of_append": model("incremental_strategy='append', not_matched_by_source_action='delete'"),
    "rw_refused": model("incremental_strategy='replace_where', incremental_predicates='id >= 5'"),  # a string too
}


def _snapshot(catalog: str) -> int:
    with reference.attached(catalog, read_only=True) as con:
        return con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]


def _tables(con: duckdb.DuckDBPyConnection, schema: str) -> dict[str, list[tuple]]:
    return {m: con.execute(f"SELECT {COLUMNS} FROM lake.{schema}.{m} ORDER BY ALL").fetchall() for m in MODELS}


def _files(data_path: str, table: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(data_path) for f in fs if os.path.basename(d) == table}


def _copy(catalog: str, data_path: str, to: Path) -> tuple[str, str]:
    """A copy of the lake (the catalog through DuckDB, so a pending WAL is in it; data files as hard links)."""
    shutil.rmtree(to, ignore_errors=True)
    to.mkdir()
    copy_catalog, copy_data = str(to / "copy.ducklake"), str(to / "data") + "/"
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{catalog}' AS src (READ_ONLY)")
        con.execute(f"ATTACH '{copy_catalog}' AS dst")
        con.execute("COPY FROM DATABASE src TO dst")
    finally:
        con.close()
    shutil.copytree(data_path, copy_data, copy_function=os.link)
    return copy_catalog, copy_data


def _duckdb_runs(copy_catalog: str, copy_data: str, schema: str, step: int) -> dict[str, list[tuple]]:
    """Each model's equivalent statements run by DuckDB on the copy (one transaction each); the tables after."""
    with reference.attached(copy_catalog, data_path=copy_data, options={"OVERRIDE_DATA_PATH": True}) as con:
        for name, (_, statements) in MODELS.items():
            con.execute("BEGIN")
            for sql in statements:
                con.execute(sql.format(t=f"lake.{schema}.{name}", s=values(step)))
            con.execute("COMMIT")
        return _tables(con, schema)


def _errors(results: object) -> dict[str, str]:
    return {r.node.name: r.message for r in results if r.status == "error"}  # type: ignore[attr-defined]


def _refused_config(errors: dict[str, str]) -> None:
    assert "not_matched_by_source_action must be 'delete' or 'update set <column> = <value>, ...', got 'remove'" \
        in errors["bad_action"]
    assert "incremental_strategy 'replace_where' needs incremental_predicates" in errors["no_predicates"]
    assert "not_matched_by_source_condition is set but not_matched_by_source_action is not" in \
        errors["condition_alone"]
    assert "skip_matched_step and skip_not_matched_step are both true and there is no not_matched_by_source_action" \
        in errors["nothing_to_do"]
    assert "not_matched_by_source_action needs a unique_key" in errors["action_without_key"]
    assert "not_matched_by_source_action is an option of the merge strategy, not of 'append'" in \
        errors["action_of_append"]


class TestMergeOptions:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        out = {f"{m}.sql": model(config, RW_WHERE if m == "replace_where" else "") for m, (config, _) in MODELS.items()}
        return out | {f"{m}.sql": sql for m, sql in BAD.items()}

    def test_first_run_refuses_bad_configurations(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        before = _snapshot(catalog)
        errors = _errors(run_dbt(["run"], expect_pass=False))
        assert set(errors) == set(BAD) - {"rw_refused"}
        _refused_config(errors)
        assert _snapshot(catalog) == before + len(MODELS) + 1  # the good models and rw_refused, nothing else
        with reference.attached(catalog, read_only=True) as con:
            tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake'"
                                                ).fetchall()}
        assert tables == {*MODELS, "rw_refused"}

    def test_incremental_runs_equal_duckdb(self, project: object, tmp_path: Path) -> None:
        creds = project.adapter.config.credentials  # type: ignore[attr-defined]
        catalog, data_path, schema = creds.catalog, creds.data_path, project.test_schema  # type: ignore[attr-defined]
        before = _snapshot(catalog)
        with reference.attached(catalog, read_only=True) as con:
            refused_rows = con.execute(f"SELECT * FROM lake.{schema}.rw_refused ORDER BY ALL").fetchall()
        refused_files = _files(data_path, "rw_refused")
        copy_catalog, copy_data = _copy(catalog, data_path, tmp_path / "copy")

        errors = _errors(run_dbt(["run", "--vars", "{step: 1}"], expect_pass=False))

        assert set(errors) == set(BAD)
        _refused_config(errors)
        assert "a row of the model does not match incremental_predicates (id >= 5); every row the model writes " \
               "must be one they replace (nothing was changed)" in errors["rw_refused"]
        expected = _duckdb_runs(copy_catalog, copy_data, schema, 1)
        with reference.attached(catalog, read_only=True) as con:
            got = _tables(con, schema)
            # one snapshot per model, each changing its own table only; the refused model's table as it was
            changed = [sorted({t for ids in changes.values() for t in ids}) for (changes,) in con.execute(
                f"SELECT changes FROM lake.snapshots() WHERE snapshot_id > {before} ORDER BY snapshot_id").fetchall()]
            assert con.execute(f"SELECT * FROM lake.{schema}.rw_refused ORDER BY ALL").fetchall() == refused_rows
        assert _files(data_path, "rw_refused") == refused_files  # nothing the refused run wrote is left
        assert len(changed) == len(MODELS) and all(len(t) == 1 for t in changed)
        assert len({t[0] for t in changed}) == len(MODELS)
        assert got == expected
        # the options' effects, spelled out
        assert got["by_source_delete"] == [(2, "b1", 2, "n0"), (3, "c", 1, "n0"), (5, "e1", 2, "n0"),
                                           (7, "g1", 1, "n1"), (9, "i1", 0, "n1")]
        # the target's 5 is not matched (incremental_predicates), so the source's is inserted
        assert got["by_source_condition"] == [(1, "a", 1, "n0"), (2, "b", 2, "n1"), (3, "c", 0, "n1"),
                                              (5, "e", 1, "n0"), (5, "e1", 2, "n1"), (7, "g1", 1, "n1"),
                                              (9, "i1", 0, "n1")]
        assert got["skipped_steps"] == [(1, "a", 1, "gone"), (2, "b", 1, "n0"), (3, "c", 1, "n0"),
                                        (4, "d", 1, "gone"), (5, "e", 1, "n0"), (6, "f", 1, "gone"),
                                        (7, "g1", 1, "n1")]
        assert got["replace_where"] == [(1, "a", 1, "n0"), (2, "b", 1, "n0"), (3, "c", 1, "n0"), (4, "d", 1, "n0"),
                                        (5, "e1", 2, "n1"), (7, "g1", 1, "n1"), (9, "i1", 0, "n1")]
