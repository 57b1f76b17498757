"""Statement routing (pure logic): which names a statement reads, and the typed change each statement is."""

import pytest

from dbt.adapters.ducklake.router import Passthrough, route


def test_refs_keep_qualified_and_bare_names() -> None:
    routed = route("select * from Sales.Orders o join customers c on o.cid = c.id")
    assert isinstance(routed, Passthrough)
    # a bare name is looked up in the profile's schema when the statement runs
    assert routed.refs == frozenset({("sales", "orders"), ("", "customers")})


def test_refs_of_a_temporary_view_include_what_its_query_reads() -> None:
    routed = route("create or replace temporary view t__dbt_tmp as select * from snapshot_customers")
    assert ("", "snapshot_customers") in routed.refs


def test_a_dml_target_is_not_a_read_unless_the_statement_reads_it_too() -> None:
    merge = route("merge into s.tgt as t using (select * from s.src) as x on t.id = x.id "
                  "when matched then update set * when not matched then insert *")
    assert merge.refs == frozenset({("s", "src")})
    insert = route("insert into s.tgt select * from s.src")
    assert insert.refs == frozenset({("s", "src")})
    # the target read in its own condition: that read needs the target's Spark view
    delete = route("delete from s.tgt where id in (select id from s.tgt where v < 0)")
    assert delete.refs == frozenset({("s", "tgt")})
    ctas = route("create or replace table s.t2 as select * from s.t2 union all select * from s.t1")
    assert ctas.refs == frozenset({("s", "t1"), ("s", "t2")})


def test_show_statements_are_answered_from_the_lake() -> None:
    from dbt.adapters.ducklake.relation_listing import pattern_matcher
    from dbt.adapters.ducklake.router import ShowRelations

    assert route("show tables in analytics like 'stg_*'") == ShowRelations("tables", "analytics", "stg_*")
    assert route('/* {"app": "dbt"} */ SHOW TABLE EXTENDED IN `an`.`x` LIKE \'*\'') == ShowRelations(
        "extended", "x", "*")
    assert route("show views from s 'a|b*'") == ShowRelations("views", "s", "a|b*")
    assert route("show tables") == ShowRelations("tables", None, None)
    # shapes the catalog cannot answer go to Spark as written
    assert isinstance(route("show table extended in s like 'a' partition (p=1)"), Passthrough)
    assert isinstance(route("show columns in s.t"), Passthrough)
    m = pattern_matcher("stg_*|Orders")
    assert m is not None and [n for n in ("stg_a", "orders", "xstg_a", "orders2") if m.fullmatch(n)] == [
        "stg_a", "orders"]


def test_clone_statements_name_their_source() -> None:
    import pytest

    from dbt.adapters.ducklake.router import Change, RoutingError

    clone = route("create or replace table `ci`.`orders` clone `prod`.`orders`")
    assert isinstance(clone, Change)
    assert (clone.kind, clone.schema, clone.name, clone.replace, clone.source) == (
        "clone", "ci", "orders", True, ("prod", "orders"))
    assert route("create table ci.o shallow clone prod.o").source == ("prod", "o")
    with pytest.raises(RoutingError, match="two-part source name"):
        route("create table ci.o clone o")


def test_added_columns_carry_the_models_ducklake_types() -> None:
    change = route("alter table s.t add columns (u string, g string, n int) "
                   "tblproperties ('ducklake.types' = 'u=uuid,g=geometry')")
    assert (change.kind, change.columns_ddl, change.types) == (
        "add_columns", "u STRING, g STRING, n INT", (("u", "uuid"), ("g", "geometry")))
    assert route("alter table s.t add columns (n int)").types == ()


def test_an_alter_with_several_actions_is_every_action() -> None:
    from dbt.adapters.ducklake.router import Alter, Change

    def drops(sql: str) -> list[str | None]:
        c = route(sql)
        assert isinstance(c, Alter) and c.kind == "alter" and (c.schema, c.name) == ("s", "t")
        assert all(p.kind == "drop_column" and (p.schema, p.name) == ("s", "t") for p in c.actions)
        return [p.column for p in c.actions]

    # both used to drop only the first column
    assert drops("alter table s.t drop columns (a, `b c`)") == ["a", "b c"]
    assert drops("alter table s.t drop column a, drop column b") == ["a", "b"]
    one = route("alter table s.t drop column a")
    assert isinstance(one, Change) and (one.kind, one.column, isinstance(one, Alter)) == ("drop_column", "a", False)
    added = route("alter table s.t add column a int, add column b string")
    assert isinstance(added, Change) and (added.kind, added.columns_ddl) == ("add_columns", "a INT, b STRING")


def test_transaction_control_is_not_a_lake_transaction() -> None:
    from dbt.adapters.ducklake.router import TransactionControl

    assert [route(s) for s in ("begin", "commit", "rollback")] == [
        TransactionControl("begin"), TransactionControl("commit"), TransactionControl("rollback")]


def _typed_statements() -> list[tuple[str, object]]:
    from dbt.adapters.ducklake import router as r

    src = frozenset({("s", "src")})
    return [
        ("create schema if not exists analytics", r.CreateSchema(name="analytics", if_not_exists=True)),
        ("create schema `an`.`x`", r.CreateSchema(name="x")),
        ("drop schema if exists analytics cascade", r.DropSchema(name="analytics", if_exists=True, cascade=True)),
        ("drop database s", r.DropSchema(name="s")),
        ("create or replace table s.t partitioned by (region, year(ts)) comment 'facts' "
         "tblproperties ('ducklake.types' = 'u=uuid') as select * from s.src",
         r.Ctas(schema="s", name="t", query="select * from s.src", replace=True, comment="facts",
                partition_by=("region", "YEAR(ts)"), types=(("u", "uuid"),), refs=src)),
        ("create table if not exists s.t (id int not null, v string) as select id, v from s.src",
         r.Ctas(schema="s", name="t", query="select id, v from s.src", if_not_exists=True, not_null=("id",), refs=src)),
        ("create or replace table ci.orders clone prod.orders",
         r.Clone(schema="ci", name="orders", source=("prod", "orders"), replace=True,
                 refs=frozenset({("prod", "orders")}))),
        # CHAR/VARCHAR become STRING (Spark schemas refuse them), nested ones too
        ("create table s.t (id int not null, name varchar(10), tags array<char(3)>) partitioned by (id) comment 'c'",
         r.CreateTable(schema="s", name="t", columns_ddl="id INT, name STRING, tags ARRAY<STRING>", comment="c",
                       partition_by=("id",), not_null=("id",))),
        ("create table if not exists s.t (u string) tblproperties ('ducklake.types' = 'u=uuid')",
         r.CreateTable(schema="s", name="t", columns_ddl="u STRING", if_not_exists=True, types=(("u", "uuid"),))),
        ("create or replace view s.v comment 'a view' as select id from s.t where id > 1",
         r.CreateView(schema="s", name="v", query="select id from s.t where id > 1", replace=True, comment="a view",
                      refs=frozenset({("s", "t")}))),
        ("drop table if exists s.t", r.DropTable(schema="s", name="t", if_exists=True)),
        ("drop view s.v", r.DropView(schema="s", name="v")),
        ("insert into s.t select * from s.src", r.Insert(schema="s", name="t", query="select * from s.src", refs=src)),
        ("insert into s.t (a, b) values (1, 'x'), (2, 'y')",
         r.Insert(schema="s", name="t", query="values (1, 'x'), (2, 'y')", columns=("a", "b"))),
        ("insert into s.t partition (p) select a, p from s.src",
         r.Insert(schema="s", name="t", query="select a, p from s.src", partition_by=("p",), refs=src)),
        ("insert overwrite s.t select * from s.src",
         r.InsertOverwrite(schema="s", name="t", query="select * from s.src", refs=src)),
        ("insert overwrite table s.t partition (p, q) select a, p, q from s.src",
         r.InsertOverwrite(schema="s", name="t", query="select a, p, q from s.src", partition_by=("p", "q"), refs=src)),
        ("delete from s.t", r.Delete(schema="s", name="t")),
        # the target, by name or alias, is `t` in the condition (as the Spark layer reads it)
        ("delete from s.t where s.t.id in (select id from s.src) and t.v > 0",
         r.Delete(schema="s", name="t", condition="t.id IN (SELECT id FROM s.src) AND t.v > 0", refs=src)),
        ("delete from s.t as d where d.id = 1", r.Delete(schema="s", name="t", condition="t.id = 1")),
        ("update s.t set v = v + 1, w = 'x' where id = 3",
         r.Update(schema="s", name="t", assignments={"v": "v + 1", "w": "'x'"}, condition="id = 3")),
        ("update s.t set v = null", r.Update(schema="s", name="t", assignments={"v": "NULL"})),
        ("merge into s.tgt as dst using (select * from s.src) as src on dst.id = src.id "
         "when matched and src.deleted then delete when matched then update set dst.v = src.v "
         "when not matched then insert (id, v) values (src.id, src.v) when not matched by source then delete",
         r.Merge(schema="s", name="tgt", source="SELECT * FROM s.src", on="t.id = s.id", refs=src, clauses=(
             r.MergeClause("matched", "delete", "s.deleted"),
             r.MergeClause("matched", "update", None, {"v": "s.v"}),
             r.MergeClause("not_matched", "insert", None, None, ("id", "v"), ("s.id", "s.v")),
             r.MergeClause("not_matched_by_source", "delete")))),
        ("merge into s.tgt using s.src on tgt.id = src.id when matched then update set * when not matched then insert *",
         r.Merge(schema="s", name="tgt", source="s.src", on="t.id = s.id", refs=src, clauses=(
             r.MergeClause("matched", "update"), r.MergeClause("not_matched", "insert")))),
        ("truncate table s.t", r.Truncate(schema="s", name="t")),
        ("alter table s.t rename to s.t2", r.Rename(schema="s", name="t", new_name="t2")),
        ("alter table s.t add columns (a int, b varchar(3))",
         r.AddColumns(schema="s", name="t", columns_ddl="a INT, b STRING")),
        ("alter table s.t add column a int", r.AddColumns(schema="s", name="t", columns_ddl="a INT")),
        ("alter table s.t drop column if exists a", r.DropColumn(schema="s", name="t", column="a", if_exists=True)),
        ("alter table s.t drop columns (a, b)", r.Alter(schema="s", name="t", actions=(
            r.DropColumn(schema="s", name="t", column="a"), r.DropColumn(schema="s", name="t", column="b")))),
        ("alter table s.t alter column a type bigint", r.AlterType(schema="s", name="t", column="a", new_type="BIGINT")),
        ("alter table s.t alter column a set not null", r.SetNullable(schema="s", name="t", column="a", nullable=False)),
        ("alter table s.t alter column a drop not null", r.SetNullable(schema="s", name="t", column="a", nullable=True)),
        ("alter table s.t alter column a comment 'the a'", r.Comment(schema="s", name="t", column="a", text="the a")),
        ("comment on table s.t is 'a table'", r.Comment(schema="s", name="t", text="a table")),
        ("comment on column s.t.a is 'col a'", r.Comment(schema="s", name="t", column="a", text="col a")),
        ("alter table s.t set tblproperties ('k' = 'v')", r.Noop(schema="s", name="t")),
        ("alter view s.v set tblproperties ('k' = 'v')", r.Noop(schema="s", name="v")),
        # a model's layout (sorted_by, write options): the table's sort keys and table options
        ("create or replace table s.t tblproperties ('ducklake.types' = 'u=uuid', 'ducklake.sorted_by' = "
         "'a desc nulls first, lower(b)', 'ducklake.option.parquet_compression' = 'zstd') as select * from s.src",
         r.Ctas(schema="s", name="t", query="select * from s.src", replace=True, types=(("u", "uuid"),), refs=src,
                sorted_by="a desc nulls first, lower(b)", table_options=(("parquet_compression", "zstd"),))),
        ("alter table s.t set tblproperties ('ducklake.sorted_by' = '', 'ducklake.option.target_file_size' = '1MB')",
         r.SetLayout(schema="s", name="t", sorted_by="", table_options=(("target_file_size", "1MB"),))),
        ("alter table s.t drop column a, drop column if exists b", r.Alter(schema="s", name="t", actions=(
            r.DropColumn(schema="s", name="t", column="a"),
            r.DropColumn(schema="s", name="t", column="b", if_exists=True)))),
        # fields of nested columns by path (lists' element, maps' key and value on the way)
        ("alter table s.t add columns (a int, p.f bigint, `l`.`element`.`g` struct<x:int>)", r.Alter(
            schema="s", name="t", actions=(
                r.AddColumns(schema="s", name="t", columns_ddl="a INT"),
                r.ColumnPathChange(schema="s", name="t", action="add", path=("p", "f"), type_ddl="BIGINT"),
                r.ColumnPathChange(schema="s", name="t", action="add", path=("l", "element", "g"),
                                   type_ddl="STRUCT<x: INT>")))),
        ("alter table s.t drop column p.f",
         r.ColumnPathChange(schema="s", name="t", action="drop", path=("p", "f"))),
        ("alter table s.t rename column `p`.`f` to `g`",
         r.ColumnPathChange(schema="s", name="t", action="rename", path=("p", "f"), new_name="g")),
        ("alter table s.t rename column a to b",
         r.ColumnPathChange(schema="s", name="t", action="rename", path=("a",), new_name="b")),
        ("alter table s.t alter column p type struct<f:bigint,g:string>",
         r.AlterType(schema="s", name="t", column="p", new_type="STRUCT<f: BIGINT, g: STRING>")),
        # not lake objects (no schema): Spark runs them as written
        ("drop table t", Passthrough("drop table t", frozenset({("", "t")}))),
    ]


@pytest.mark.parametrize(("sql", "expected"), _typed_statements(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_kind_of_statement_routes_to_its_typed_change(sql: str, expected: object) -> None:
    assert route(sql) == expected


def test_every_kind_keeps_its_label() -> None:
    # users see these: the cursor's message (INSERT 5) and the lake commit's message (insert main.t)
    assert {t.__name__: t.kind for t in _concrete_changes()} == {
        "CreateSchema": "create_schema", "DropSchema": "drop_schema", "Ctas": "ctas", "Clone": "clone",
        "CreateTable": "create_table", "CreateView": "create_view", "DropTable": "drop_table", "DropView": "drop_view",
        "Insert": "insert", "InsertOverwrite": "insert_overwrite", "Delete": "delete", "Update": "update",
        "Merge": "merge", "Truncate": "truncate", "Rename": "rename", "AddColumns": "add_columns",
        "DropColumn": "drop_column", "AlterType": "alter_type", "SetNullable": "set_nullable", "Comment": "comment",
        "Alter": "alter", "Noop": "noop", "ColumnPathChange": "alter_column",
        "SetLayout": "set_layout"}
    routed = {type(c) for _, c in _typed_statements()}
    assert set(_concrete_changes()) <= routed, "a kind without a statement in the table above"


def _concrete_changes() -> list[type]:
    import inspect

    from dbt.adapters.ducklake import router as r

    return [t for _, t in inspect.getmembers(r, inspect.isclass)
            if issubclass(t, r.Change) and t is not r.Change and t.__module__ == r.__name__]


def test_every_change_type_has_a_handler() -> None:
    import pytest

    from dbt.adapters.ducklake.apply import HANDLERS, apply_change
    from dbt.adapters.ducklake.router import Change, RoutingError
    from dbt.adapters.ducklake.seeds import Seed

    missing = [t.__name__ for t in _concrete_changes() if t not in HANDLERS]
    assert not missing, f"no handler in apply.HANDLERS for {missing}"

    class Work:  # apply_change's only use of the work before it finds no handler
        def discard_unreferenced(self) -> None:
            pass

    # a Seed is staged by load_seed itself, never applied: a type without a handler is refused, not ignored
    with pytest.raises(RoutingError, match="unsupported change 'seed'"):
        apply_change(None, Work(), Seed(schema="s", name="t"))  # type: ignore[arg-type]
    with pytest.raises(RoutingError, match="unsupported change 'Change'"):
        apply_change(None, Work(), Change(schema="s", name="t"))  # type: ignore[arg-type]
