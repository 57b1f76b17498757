"""The DuckLake 1.0 format layer: catalogs, snapshots and commits that DuckDB's ducklake extension accepts.

Knows nothing of Spark or dbt.
"""

from .catalog.state import LakeState
from .errors import (
    CatalogConnectionError,
    CommitConflictError,
    CommitStateUnknownError,
    DuckLakeError,
    NoSuchSnapshotError,
    NoSuchTableError,
    NotALakeError,
    UnsupportedTypeError,
    UnsupportedVersionError,
)
from .lake import DuckLake
from .read.scan import plan_scan, read_arrow
from .records import Column, DataFile, Snapshot, TableInfo, ViewInfo
from .write.transaction import Transaction
from .write.writer import write_data_files

__all__ = [
    "CatalogConnectionError", "Column", "CommitConflictError", "CommitStateUnknownError", "DataFile", "DuckLake",
    "DuckLakeError", "LakeState", "NoSuchSnapshotError", "NoSuchTableError", "NotALakeError", "Snapshot",
    "TableInfo", "Transaction", "UnsupportedTypeError", "UnsupportedVersionError", "ViewInfo", "plan_scan",
    "read_arrow", "write_data_files",
]
