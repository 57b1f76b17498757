"""Seed rows (an agate table, as dbt reads the CSV on the driver) as a Spark DataFrame of the seed's column types, and
the `Seed` change that labels their load."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from .router import Change
from .spark.sql_literals import string_literal

VALUES_CELLS = 5_000  # an inline table of this many literals parses and analyzes faster than a Spark job writes it


@dataclass(frozen=True, kw_only=True)
class Seed(Change):
    """A seed's table, created or replaced with the seed's rows. Not a routed statement (load_seed stages it itself):
    a Change for the label of its operation in the commit message ("seed main.countries")."""

    kind: ClassVar[str] = "seed"


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


def is_inline(names: Sequence[str], rows: Sequence[Sequence[Any]]) -> bool:
    """Whether `seed_dataframe` makes the rows an inline table of the driver (bounded by VALUES_CELLS values)."""
    return len(rows) * len(names) <= VALUES_CELLS


def seed_dataframe(spark: SparkSession, names: Sequence[str], rows: Sequence[Sequence[Any]],
                   types: Sequence[str]) -> DataFrame:
    """Rows as text, cast by Spark to each column's type (so a column_types override is any Spark type).

    Up to VALUES_CELLS values are an inline VALUES table, which Spark evaluates on the driver (no job: the lake
    writer writes the rows, spark/local_write; on Spark Connect when the write is told so: `is_inline`); larger seeds
    are a DataFrame of the rows, written by the executors.
    """
    raw = [f"c{i}" for i in range(len(names))]
    quoted = ["`" + n.replace("`", "``") + "`" for n in names]
    casts = [f"CAST({r} AS {t}) AS {q}" for r, t, q in zip(raw, types, quoted, strict=True)]
    texts = [tuple(_text(v) for v in row) for row in rows]
    if names and texts and is_inline(names, texts):
        values = ", ".join("(" + ", ".join("NULL" if v is None else string_literal(v) for v in row) + ")"
                           for row in texts)
        return spark.sql(f"SELECT {', '.join(casts)} FROM VALUES {values} AS v({', '.join(raw)})")
    schema = T.StructType([T.StructField(r, T.StringType()) for r in raw])
    return spark.createDataFrame(texts, schema).selectExpr(*casts)
