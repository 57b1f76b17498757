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
