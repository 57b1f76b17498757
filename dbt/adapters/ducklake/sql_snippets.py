"""Spark SQL snippets dbt's cross-database macros need, built with sqlglot where the input is SQL."""

from __future__ import annotations

import sqlglot


def listagg(measure: str, delimiter_text: str, order_by_clause: str | None, limit_num: int | None) -> str:
    if not order_by_clause:
        collected = f"collect_list({measure})"
        if limit_num:
            collected = f"slice({collected}, 1, {int(limit_num)})"
        return f"array_join({collected}, {delimiter_text})"
    if not limit_num:
        return f"listagg({measure}, {delimiter_text}) within group ({order_by_clause})"
    # keep the first N by the order: collect (keys..., value), sort with a comparator that honours ASC/DESC per key
    order = sqlglot.parse_one(f"select 1 {order_by_clause}", read="spark").args["order"]
    keys = [(o.this.sql(dialect="spark"), bool(o.args.get("desc"))) for o in order.expressions]
    fields = ", ".join(f"{k} AS k{i}" for i, (k, _d) in enumerate(keys))
    cases = " ".join(
        f"WHEN l.k{i} < r.k{i} THEN {1 if desc else -1} WHEN l.k{i} > r.k{i} THEN {-1 if desc else 1}"
        for i, (_k, desc) in enumerate(keys))
    sorted_ = f"array_sort(collect_list(struct({fields}, {measure} AS m)), (l, r) -> CASE {cases} ELSE 0 END)"
    return f"array_join(slice(transform({sorted_}, x -> x.m), 1, {int(limit_num)}), {delimiter_text})"



