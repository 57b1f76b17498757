"""What on_schema_change reads from a nested column's old and new types: the fields append_new_columns adds, and the
stored DuckLake types sync_all_columns keeps where Spark reads them as the model's types."""

from __future__ import annotations

from pyspark.sql import types as T

from dbt.adapters.ducklake.lake.records import Column
from dbt.adapters.ducklake.spark.types import added_fields, keep_stored_types


def _st(**fields: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(k, v) for k, v in fields.items()])


def test_added_fields_go_through_lists_and_maps_by_name() -> None:
    i, s, b = T.IntegerType(), T.StringType(), T.LongType()
    old = _st(s=_st(a=i, B=s), l=T.ArrayType(_st(x=i)), m=T.MapType(s, _st(p=i)))
    new = _st(s=_st(b=s, c=b, a=b), l=T.ArrayType(_st(x=i, y=_st(z=i))), m=T.MapType(s, _st(q=i, p=i)))
    found = [(path, t.simpleString()) for o, n in zip(old.fields, new.fields, strict=True)
             for path, t in added_fields(o.dataType, n.dataType, (o.name,))]
    # only new fields: a's wider type and B's case are left to sync_all_columns
    assert found == [(("s", "c"), "bigint"), (("l", "element", "y"), "struct<z:int>"), (("m", "value", "q"), "int")]
    assert added_fields(i, _st(a=i), ("s",)) == []


def test_stored_types_spark_reads_alike_are_kept() -> None:
    def c(name: str, type_: str, *kids: Column) -> Column:
        return Column(0, name, type_, children=kids)

    current = c("s", "struct", c("id", "uuid"), c("n", "int32"), c("j", "json"))
    target = c("s", "struct", c("id", "varchar"), c("n", "int64"), c("j", "varchar"), c("new", "varchar"))
    kept = keep_stored_types(current, target)
    assert [(k.name, k.type) for k in kept.children] == [("id", "uuid"), ("n", "int64"), ("j", "json"),
                                                        ("new", "varchar")]
    assert keep_stored_types(c("s", "struct", c("a", "int32")), c("s", "int32")) == c("s", "int32")
