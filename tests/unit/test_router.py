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
