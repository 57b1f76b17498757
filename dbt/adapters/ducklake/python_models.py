"""dbt Python models: `def model(dbt, session)` run in the adapter's SparkSession, its result made a temporary view.

The model's code (dbt's compiled text: the user's file, then dbt's `dbtObj`/`ref`/`source`/`config` helpers) runs in
the dbt process, where the SparkSession lives (local, standalone cluster or Spark Connect alike); Spark runs what
the returned DataFrame computes. The result becomes a temporary view, and the SQL materializations take it from
there (`select * from <view>`), so a Python model gets the same snapshots, contracts, on_schema_change and
incremental strategies as a SQL one, and nothing is staged before the model's code has returned.

Beyond dbt's API, the `dbt` object has DuckLake's time travel and change feed, mirroring the SQL macros:
`dbt.ducklake_at(dbt.ref("orders"), version=3)` and `dbt.ducklake_changes(dbt.source("shop", "raw"))`.
"""

from __future__ import annotations

import importlib.metadata
import linecache
import re
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession


class PythonModelError(RuntimeError):
    """A Python model failed or returned something that is not a table (the message says which and where)."""


@dataclass(frozen=True)
class Relation:
    """A lake relation a Python model read, by the name dbt resolved for it."""

    schema: str
    identifier: str


def parse_relation(name: str) -> Relation:
    """`schema`.`table` / schema.table (as dbt renders a ref or source) as parts."""
    parts = [p.strip("`\"") for p in re.findall(r"`[^`]*`|\"[^\"]*\"|[^.]+", name)]
    if len(parts) < 2:
        raise PythonModelError(f"{name!r} is not a schema-qualified relation")
    return Relation(parts[-2], parts[-1])


def check_packages(model_name: str, packages: list[str] | None) -> None:
    """The `packages` config: they must be installed where dbt runs, since the model's code runs there.

    Raises:
        PythonModelError: naming the missing ones and how to install them.
    """
    missing = []
    for spec in packages or []:
        dist = re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0]
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            missing.append(spec)
    if missing:
        raise PythonModelError(
            f"Python model {model_name} lists packages that are not installed: {', '.join(missing)}. dbt-ducklake "
            "runs a Python model's code in the dbt process (DataFrame work runs on Spark): install them into the "
            f"environment dbt runs in (pip install {' '.join(missing)}). Code that runs on executors (UDFs) needs "
            "them on the Spark workers too.")


def as_dataframe(spark: SparkSession, result: Any, model_name: str) -> DataFrame:
    """A PySpark DataFrame; a pandas DataFrame or a pyarrow Table is converted.

    Raises:
        PythonModelError: anything else, naming its type.
    """
    if isinstance(result, DataFrame):
        return result
    kind = f"{type(result).__module__}.{type(result).__qualname__}"
    if kind.startswith("pyspark.pandas.") and hasattr(result, "to_spark"):
        return result.to_spark()  # pandas API on Spark: already distributed
    if kind.startswith("pandas.") and type(result).__name__ == "DataFrame":
        return spark.createDataFrame(result)
    if kind.startswith("pyarrow.") and type(result).__name__ == "Table":
        return spark.createDataFrame(result.to_pandas(types_mapper=None))
    raise PythonModelError(
        f"Python model {model_name}: model() returned {kind}; it must return a PySpark DataFrame, a pandas "
        "DataFrame (or pandas API on Spark), a pandas DataFrame or a pyarrow Table")


def _leading_offset(code: str, filename: str) -> int:
    """How many lines the model file has before the compiled code's first line (0 if unknown)."""
    try:
        with open(filename, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0
    compiled = code.splitlines()
    first = next((i for i, line in enumerate(compiled) if line.strip()), None)
    if first is None:
        return 0
    for i, line in enumerate(lines):
        if line == compiled[first]:
            return max(i - first, 0)
    return 0


def _user_traceback(exc: BaseException, filename: str) -> str:
    """The traceback from the model's own frames on (dbt's and this module's frames left out)."""
    frames = traceback.extract_tb(exc.__traceback__)
    first = next((i for i, f in enumerate(frames) if f.filename == filename), 0)
    lines = traceback.format_list(frames[first:])
    return "Traceback (most recent call last):\n" + "".join(lines) + "".join(
        traceback.format_exception_only(type(exc), exc))


def run_model(spark: SparkSession, code: str, *, model_name: str, filename: str,
              load: Callable[[Relation], DataFrame],
              at: Callable[[Relation, dict[str, Any]], DataFrame],
              changes: Callable[[Relation, bool], DataFrame]) -> DataFrame:
    """Run a compiled Python model and return its rows as a DataFrame.

    load(relation) reads a ref or source at the lake's current snapshot; at(relation, kwargs) as of a version,
    timestamp or changes_back; changes(relation, is_incremental) its change feed since this model last consumed it.

    Raises:
        PythonModelError: the model raised (with its traceback, from its own file), has no model(), or returned
            something that is not a table.
    """
    # the compiled code starts with the user's file (dbt may strip its leading blank lines): line it up with the
    # file, so that tracebacks point at the user's lines
    code = "\n" * _leading_offset(code, filename) + code
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    # `spark` is a global too, as in dbt-spark's Python models
    namespace: dict[str, Any] = {"__name__": f"dbt_python_model_{model_name}", "__file__": filename, "spark": spark}
    read: dict[int, Relation] = {}  # id(DataFrame) -> the relation it reads, for ducklake_at / ducklake_changes

    def load_df(name: str) -> DataFrame:
        rel = parse_relation(name)
        df = load(rel)
        read[id(df)] = rel
        return df

    def relation_of(what: DataFrame | str) -> Relation:
        if isinstance(what, str):
            return parse_relation(what)
        rel = read.get(id(what))
        if rel is None:
            raise PythonModelError("ducklake_at / ducklake_changes take a DataFrame returned by dbt.ref() or "
                                   "dbt.source() (unchanged), or a relation name")
        return rel

    try:
        exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - running the user's model is the point
        if not callable(namespace.get("model")):
            raise PythonModelError(f"Python model {model_name} ({filename}) defines no function model(dbt, session)")
        dbt = namespace["dbtObj"](load_df)
        dbt.ducklake_at = lambda df, **kw: at(relation_of(df), kw)
        dbt.ducklake_changes = lambda df: changes(relation_of(df), bool(dbt.is_incremental))
        result = namespace["model"](dbt, spark)
    except PythonModelError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code can raise anything: report it with their traceback
        raise PythonModelError(f"Python model {model_name} failed:\n{_user_traceback(e, filename)}") from e
    return as_dataframe(spark, result, model_name)


def temp_view_name(unique_id: str) -> str:
    """A temporary view name for one run of a Python model (unique: dbt's threads share one SparkSession)."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", unique_id)[-80:]
    return f"{stem}__dbt_python_{uuid.uuid4().hex[:8]}"
