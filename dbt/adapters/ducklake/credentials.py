"""The `type: ducklake` profile."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dbt.adapters.contracts.connection import Credentials
from dbt_common.exceptions import DbtRuntimeError

MASTER_PREFIXES = ("local", "spark://", "sc://")


@dataclass
class DuckLakeCredentials(Credentials):
    # the catalog: a path to a DuckDB file (relative to where dbt runs), duckdb:///…, sqlite:///…, postgresql://…
    catalog: str = "metadata.ducklake"
    # where Parquet files go: a local folder or any shared file system Spark and the driver both reach
    data_path: str = "data/"
    # Spark: local[*] (embedded, the default), local[N], spark://host:7077 (standalone), sc://host:15002 (Connect)
    master: str = "local[*]"
    # extra Spark settings, e.g. {"spark.driver.memory": "4g"}
    spark_config: dict[str, str] = field(default_factory=dict)
    # the author of the snapshots dbt commits (default: the operating system user)
    author: str | None = None
    schema: str = "main"  # type: ignore[assignment]
    database: str | None = None  # type: ignore[assignment]

    _ALIASES = {"catalog_url": "catalog", "spark_master": "master"}  # noqa: RUF012 - read by dbt's Credentials

    @classmethod
    def __pre_deserialize__(cls, data: dict[Any, Any]) -> dict[Any, Any]:
        data = super().__pre_deserialize__(data)
        data.setdefault("database", None)
        return data

    def __post_init__(self) -> None:
        if self.database is not None and self.database != self.schema:
            raise DbtRuntimeError(
                f"ducklake profile: `database` ({self.database!r}) must be omitted or equal to `schema` "
                f"({self.schema!r}); a DuckLake has schemas, not databases")
        self.database = None
        if not self.catalog:
            raise DbtRuntimeError("ducklake profile: `catalog` must name a catalog database (a path or a URL)")
        if not self.data_path:
            raise DbtRuntimeError("ducklake profile: `data_path` must name the folder for the Parquet files")
        if not self.master.startswith(MASTER_PREFIXES):
            raise DbtRuntimeError(
                f"ducklake profile: `master` {self.master!r} is not a Spark master this adapter can use; "
                "expected local[*] / local[N], spark://host:port or sc://host:port")
        if not isinstance(self.spark_config, dict):
            raise DbtRuntimeError("ducklake profile: `spark_config` must be a mapping of Spark settings to values")

    @property
    def type(self) -> str:
        return "ducklake"

    @property
    def unique_field(self) -> str:
        return self.catalog

    def _connection_keys(self) -> tuple[str, ...]:
        return ("catalog", "data_path", "schema", "master", "spark_config", "author")
