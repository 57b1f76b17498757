"""What a catalog's spec version changes in the SQL this layer writes and reads: DuckLake 1.0 (DuckDB 1.5) and
DuckLake 1.1 (DuckDB 2.0).

1.1 adds columns at the end of existing catalog tables (`row_group_count` on data and delete files; newer builds
also `parent_schema_id` on schemas and exactness flags on column stats), adds `ducklake_view_column_tag`, prefixes
the system columns of inlined-data tables with `_ducklake_`, adds the `epoch_*` partition transforms and lets one
Puffin file hold several snapshots' deletion vectors. Added columns have no default: rows that do not set them hold
NULL, which the specification gives to every row written before a migration too. So a statement written for 1.0
stays right on a 1.1 catalog once it names its columns: `adapt` gives every positional INSERT into a catalog table
the 1.0 column list, and the few 1.1 values this layer writes (row group counts, view column tags) are added
where they are known.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

from . import ddl

V1_0 = "1.0"
# '1.1-dev1' is what DuckDB's development builds stamped on catalogs before the release called it '1.1'
V1_1 = ("1.1", "1.1-dev1")
READABLE_VERSIONS = (V1_0, *V1_1)

_POSITIONAL_INSERT = re.compile(r"(\s*INSERT\s+INTO\s+\{p\})(ducklake_\w+)(\s+VALUES\s*\()", re.IGNORECASE)


@dataclass(frozen=True)
class InlinedColumns:
    """The system columns of an inlined-data table (ducklake_inlined_data_<table id>_<schema version>)."""

    row_id: str
    begin_snapshot: str
    end_snapshot: str

    def is_reserved(self, name: str) -> bool:
        """Whether a user column of that name cannot live in an inlined-data table."""
        low = name.lower()
        if self.row_id.startswith("_ducklake_"):
            return low.startswith("_ducklake_")  # 1.1 reserves the whole prefix
        return low in (self.row_id, self.begin_snapshot, self.end_snapshot)


@dataclass(frozen=True)
class CatalogSpec:
    """One catalog's spec version and the columns its tables have beyond 1.0's."""

    version: str = V1_0
    extra_columns: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def is_1_1(self) -> bool:
        return self.version in V1_1

    @property
    def inlined(self) -> InlinedColumns:
        if self.is_1_1:
            return InlinedColumns("_ducklake_row_id", "_ducklake_begin_snapshot", "_ducklake_end_snapshot")
        return InlinedColumns("row_id", "begin_snapshot", "end_snapshot")

    def has(self, table: str, column: str) -> bool:
        """Whether a catalog table has a column beyond its 1.0 ones (row_group_count, parent_schema_id, ...)."""
        return column in self.extra_columns.get(table, frozenset())

    @property
    def row_group_counts(self) -> bool:
        """Whether data and delete file rows carry their Parquet row-group count (1.1)."""
        return self.has("ducklake_data_file", "row_group_count")

    @property
    def view_column_tags(self) -> bool:
        return self.is_1_1

    @property
    def epoch_transforms(self) -> bool:
        """The epoch_* partition transforms: a 1.0 reader cannot read a partition spec that uses them."""
        return self.is_1_1

    @property
    def nested_schemas(self) -> bool:
        return self.has("ducklake_schema", "parent_schema_id")

    @property
    def versioned_options(self) -> bool:
        """Options in ducklake_metadata carry begin/end snapshots (a 1.1 development layout)."""
        return self.has("ducklake_metadata", "end_snapshot")

    @property
    def option_rows_sql(self) -> str:
        """SELECT (scope, scope_id, value) of one option (bind :k), the lake-wide one as (None, None, value)."""
        current = " AND end_snapshot IS NULL" if self.versioned_options else ""
        return ("SELECT NULLIF(scope, 'global'), CASE WHEN scope IS NULL OR scope = 'global' THEN NULL ELSE scope_id "
                f"END, value FROM {{p}}ducklake_metadata WHERE key = :k{current}")

    def adapt(self, sql: str) -> str:
        """The statement for this catalog: on 1.1, a positional INSERT into a catalog table names its 1.0 columns
        (the added ones stay NULL, as the specification has them for rows that do not set them)."""
        if not self.extra_columns:
            return sql
        return _named_insert(sql)


@cache
def _named_insert(sql: str) -> str:
    m = _POSITIONAL_INSERT.match(sql)
    if m is None:
        return sql
    cols = ddl.table_columns().get(m.group(2))
    if not cols:
        return sql
    return f"{m.group(1)}{m.group(2)} ({', '.join(cols)}){m.group(3)}" + sql[m.end():]


def spec_for(version: str, columns: Mapping[str, set[str] | frozenset[str]]) -> CatalogSpec:
    """A catalog's spec from its version and the columns its catalog tables have (by table)."""
    base = ddl.table_columns()
    extra = {t: frozenset(c.lower() for c in cols) - frozenset(base[t]) for t, cols in columns.items() if t in base}
    return CatalogSpec(version, {t: c for t, c in extra.items() if c})


SPEC_1_0 = CatalogSpec()
