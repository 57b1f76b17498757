"""distinct_parts: no part holds two items with one key; order kept; the fewest parts the greedy rule gives."""

from __future__ import annotations

from dbt.adapters.ducklake.spark.read.distinct_parts import distinct_parts


def test_items_with_one_key_go_to_different_parts_in_order() -> None:
    items = [("a", 1), ("b", 2), ("c", 1), ("d", 1), ("e", 3), ("f", 2)]
    parts = distinct_parts(items, lambda i: i[1])
    assert parts == [[("a", 1), ("b", 2), ("e", 3)], [("c", 1), ("f", 2)], [("d", 1)]]
    for part in parts:
        assert len({k for _, k in part}) == len(part)


def test_no_items_no_parts() -> None:
    assert distinct_parts([], lambda i: i) == []
