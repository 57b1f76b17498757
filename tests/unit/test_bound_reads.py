"""Binding a statement's lake reads to private relations (spark/read/bound_reads): which names are replaced, and how."""

from __future__ import annotations

from dbt.adapters.ducklake.router import written_target
from dbt.adapters.ducklake.spark.read.bound_reads import parse, read_refs, rebind, view_refs

RELATIONS = {("main", "x"): "__p1", ("raw", "src"): "__p2", ("main", "t"): "__target"}


def test_a_plain_read_is_replaced_and_keeps_its_name_as_alias() -> None:
    assert rebind("select x.id from main.x", RELATIONS) == "select x.id from __p1 AS `x`"
    assert rebind("select a.id from main.x a", RELATIONS) == "select a.id from __p1 a"
    assert rebind("select * from `raw` . `src` s join main.x on s.id = x.id", RELATIONS) == \
        "select * from __p2 s join __p1 AS `x` on s.id = x.id"


def test_reads_in_subqueries_ctes_and_set_operations() -> None:
    sql = "with q as (select id from raw.src) select * from q where id in (select id from main.x) union all " \
          "select id from raw.src"
    assert rebind(sql, RELATIONS) == ("with q as (select id from __p2 AS `src`) select * from q where id in "
                                      "(select id from __p1 AS `x`) union all select id from __p2 AS `src`")


def test_the_written_target_stays_and_its_other_reads_are_bound() -> None:
    sql = "merge into main.t t using (select * from main.t where id > 0) s on t.id = s.id when matched then delete"
    assert rebind(sql, RELATIONS, written=written_target) == (
        "merge into main.t t using (select * from __target AS `t` where id > 0) s on t.id = s.id when matched "
        "then delete")
    tree = parse("insert into main.t select * from raw.src")
    assert tree is not None and read_refs(tree, written_target(tree)) == {("raw", "src")}


def test_what_is_left_to_the_shared_names() -> None:
    # unqualified names (a CTE, a temporary view, the current schema), columns naming schema.table, time travel
    assert rebind("select * from x", RELATIONS) == "select * from x"
    sql = "select main.x.id from main.x"
    assert rebind(sql, RELATIONS) == sql
    tree = parse("select * from raw.src TABLESAMPLE (10 PERCENT)")
    assert tree is not None and read_refs(tree) == set()
    assert rebind("select 1 as a from unrelated.thing", RELATIONS) == "select 1 as a from unrelated.thing"


def test_derived_table_relations_for_connect() -> None:
    rel = {("raw", "src"): "(SELECT 1 AS id)"}
    assert rebind("select s.id from raw.src s", rel) == "select s.id from (SELECT 1 AS id) s"


def test_view_refs() -> None:
    assert view_refs("select * from main.a join b on true") == {("main", "a")}
    assert view_refs("select * from (((") is None
