"""Statement routing (pure logic): which names a statement reads."""

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
    assert (clone.kind, clone.schema, clone.name, clone.replace, clone.clone_of) == (
        "clone", "ci", "orders", True, ("prod", "orders"))
    assert route("create table ci.o shallow clone prod.o").clone_of == ("prod", "o")
    with pytest.raises(RoutingError, match="two-part source name"):
        route("create table ci.o clone o")


def test_added_columns_carry_the_models_ducklake_types() -> None:
    change = route("alter table s.t add columns (u string, g string, n int) "
                   "tblproperties ('ducklake.types' = 'u=uuid,g=geometry')")
    assert (change.kind, change.columns_ddl, change.types) == (
        "add_columns", "u STRING, g STRING, n INT", (("u", "uuid"), ("g", "geometry")))
    assert route("alter table s.t add columns (n int)").types == ()


def test_an_alter_with_several_actions_is_every_action() -> None:
    from dbt.adapters.ducklake.router import Change

    def drops(sql: str) -> list[str | None]:
        c = route(sql)
        assert isinstance(c, Change) and c.kind == "alter" and (c.schema, c.name) == ("s", "t")
        assert all(p.kind == "drop_column" and (p.schema, p.name) == ("s", "t") for p in c.actions)
        return [p.column for p in c.actions]

    # both used to drop only the first column
    assert drops("alter table s.t drop columns (a, `b c`)") == ["a", "b c"]
    assert drops("alter table s.t drop column a, drop column b") == ["a", "b"]
    one = route("alter table s.t drop column a")
    assert isinstance(one, Change) and (one.kind, one.column, one.actions) == ("drop_column", "a", ())
    added = route("alter table s.t add column a int, add column b string")
    assert isinstance(added, Change) and (added.kind, added.columns_ddl) == ("add_columns", "a INT, b STRING")


def test_transaction_control_is_not_a_lake_transaction() -> None:
    from dbt.adapters.ducklake.router import TransactionControl

    assert [route(s) for s in ("begin", "commit", "rollback")] == [
        TransactionControl("begin"), TransactionControl("commit"), TransactionControl("rollback")]
