"""What the upkeep steps need of a lake: a transaction's handle, plus the lake's options and new transactions. The
facade (`DuckLake`) is one; naming this instead of the facade keeps `maintenance/` below it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..write.lake_handle import LakeHandle

if TYPE_CHECKING:
    from ..records import TableInfo
    from ..write.layout import WriteOptions
    from ..write.transaction import Transaction


class MaintainedLake(LakeHandle, Protocol):
    def option(self, name: str, table_id: int | None = None, schema_id: int | None = None) -> str | None:
        """A set_option value (table scope, then schema scope, then global), as DuckDB resolves it."""
        ...

    def write_options(self, table: TableInfo, staged: Mapping[str, str] | None = None) -> WriteOptions:
        """The Parquet layout options of the table's data files."""
        ...

    def transaction(self, **kw: Any) -> Transaction:
        """Start staging changes, committed as one snapshot."""
        ...

    def files_deleted(self, paths: Collection[str]) -> None:
        """Files of the lake were deleted: what was kept about them is forgotten (lake_cache.LakeCache)."""
        ...
