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


# Domain failures that callers have always caught as ValueError: each is a ValueError too, so `except ValueError`
# keeps working. A plain ValueError stays a caller's misuse of an argument (an unknown `form`, both of two exclusive
# arguments given to an internal function).


class InvalidOptionError(DuckLakeError, ValueError):
    """An option or setting outside its domain: a write option, data_inlining_row_limit, a maintenance size, count,
    interval or threshold, exclusive maintenance arguments given together, a clone mode, an empty data path."""


class InvalidSortKeyError(InvalidOptionError):
    """A sorted_by that names no key, is not a list of DuckDB sort expressions, or names columns the table lacks."""


class UnreachableStorageError(DuckLakeError, ValueError):
    """A path in a storage the driver cannot reach (gs://, hdfs://, ...): lake files are local, file:// or s3://."""


class TransactionOrderError(DuckLakeError, ValueError):
    """A change a transaction cannot stage after what it holds: a clone of a table changed earlier in it, a clone into
    a table it did not create, staged files swapped on a table it did not create."""


class DeletePositionError(DuckLakeError, ValueError):
    """Positions to delete that lie outside their data file's rows."""


class NotParquetError(InvalidDataFileError, ValueError):
    """A data or delete file without Parquet's PAR1 magic at its end."""


class CatalogValueError(DuckLakeError, ValueError):
    """A value stored in the catalog that is not in the form DuckLake stores it (a timestamp's or interval's text)."""


class InvalidValueError(DuckLakeError, ValueError):
    """A value that is not of its DuckLake type or does not fit it: a default's, statistic's or literal's text, an
    integer out of range, a decimal with too many digits."""
