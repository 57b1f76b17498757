"""Errors of the DuckLake format layer: one flat hierarchy under DuckLakeError."""

from __future__ import annotations


class DuckLakeError(Exception):
    """Base class of every error this layer raises on purpose."""


class CatalogConnectionError(DuckLakeError):
    """The catalog database could not be reached or opened."""


class NotALakeError(DuckLakeError):
    """The catalog database holds no DuckLake (or a damaged one)."""


class UnsupportedVersionError(DuckLakeError):
    """The lake was written in a spec version this layer does not read or write."""


class UnsupportedFeatureError(UnsupportedVersionError):
    """A part of a newer spec's lake (a table, schema or operation) this version cannot read or write yet."""


class LakeExistsError(DuckLakeError):
    """A new lake was asked for where one already exists."""


class NoSuchSnapshotError(DuckLakeError):
    """A snapshot version or timestamp that the lake does not have."""


class NoSuchSchemaError(DuckLakeError):
    """A schema name or id that is not visible at the snapshot."""


class NoSuchTableError(DuckLakeError):
    """A table or view name or id that is not visible at the snapshot."""


class NoSuchColumnError(DuckLakeError):
    """A column that the table does not have."""


class SchemaExistsError(DuckLakeError):
    """CREATE SCHEMA of a name that is taken."""


class TableExistsError(DuckLakeError):
    """CREATE TABLE/VIEW of a name that is taken."""


class SchemaEvolutionError(DuckLakeError):
    """An ALTER that DuckLake does not allow (e.g. a narrowing type change)."""


class UnsupportedTypeError(DuckLakeError):
    """A type with no DuckLake equivalent."""


class InvalidDataFileError(DuckLakeError):
    """A data file that does not fit the table it is added to."""


class CommitConflictError(DuckLakeError):
    """Another writer committed a change that conflicts with this transaction."""


class CommitStateUnknownError(DuckLakeError):
    """The catalog failed mid-commit in a way that leaves the outcome unknown."""


class TransactionClosedError(DuckLakeError):
    """A transaction was used after it committed or failed."""


class MissingDataFileError(DuckLakeError):
    """A data or delete file the catalog lists is missing, of another size than listed, or unreadable: a read of it
    would be wrong (Spark skips a missing file silently), so it is refused.

    path is the file's path as the catalog resolves it; context names the table and snapshot being read."""

    def __init__(self, message: str, *, path: str, kind: str, context: str) -> None:
        super().__init__(message)
        self.path = path
        self.kind = kind
        self.context = context
