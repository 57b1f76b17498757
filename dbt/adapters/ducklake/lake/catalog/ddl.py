# ruff: noqa: E501
"""The DuckLake 1.0 catalog tables, with the column names and DuckDB types the reference creates them with."""

from __future__ import annotations

import re
from functools import cache

SPEC_VERSION = "1.0"

# One CREATE TABLE per catalog table, in the reference's order; '{schema}' is the metadata schema prefix.
CATALOG_TABLES: tuple[str, ...] = (
    "CREATE TABLE {schema}ducklake_metadata(key VARCHAR NOT NULL, value VARCHAR NOT NULL, scope VARCHAR, scope_id BIGINT)",
    "CREATE TABLE {schema}ducklake_snapshot(snapshot_id BIGINT PRIMARY KEY, snapshot_time TIMESTAMPTZ, schema_version BIGINT, next_catalog_id BIGINT, next_file_id BIGINT)",
    "CREATE TABLE {schema}ducklake_snapshot_changes(snapshot_id BIGINT PRIMARY KEY, changes_made VARCHAR, author VARCHAR, commit_message VARCHAR, commit_extra_info VARCHAR)",
    "CREATE TABLE {schema}ducklake_schema(schema_id BIGINT PRIMARY KEY, schema_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN)",
    "CREATE TABLE {schema}ducklake_table(table_id BIGINT, table_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_id BIGINT, table_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN)",
    "CREATE TABLE {schema}ducklake_view(view_id BIGINT, view_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_id BIGINT, view_name VARCHAR, dialect VARCHAR, sql VARCHAR, column_aliases VARCHAR)",
    "CREATE TABLE {schema}ducklake_tag(object_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, key VARCHAR, value VARCHAR)",
    "CREATE TABLE {schema}ducklake_column_tag(table_id BIGINT, column_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, key VARCHAR, value VARCHAR)",
    "CREATE TABLE {schema}ducklake_data_file(data_file_id BIGINT PRIMARY KEY, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, file_order BIGINT, path VARCHAR, path_is_relative BOOLEAN, file_format VARCHAR, record_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, row_id_start BIGINT, partition_id BIGINT, encryption_key VARCHAR, mapping_id BIGINT, partial_max BIGINT)",
    "CREATE TABLE {schema}ducklake_file_column_stats(data_file_id BIGINT, table_id BIGINT, column_id BIGINT, column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR)",
    "CREATE TABLE {schema}ducklake_file_variant_stats(data_file_id BIGINT, table_id BIGINT, column_id BIGINT, variant_path VARCHAR, shredded_type VARCHAR, column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR)",
    "CREATE TABLE {schema}ducklake_delete_file(delete_file_id BIGINT PRIMARY KEY, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, data_file_id BIGINT, path VARCHAR, path_is_relative BOOLEAN, format VARCHAR, delete_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, encryption_key VARCHAR, partial_max BIGINT)",
    "CREATE TABLE {schema}ducklake_column(column_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, table_id BIGINT, column_order BIGINT, column_name VARCHAR, column_type VARCHAR, initial_default VARCHAR, default_value VARCHAR, nulls_allowed BOOLEAN, parent_column BIGINT, default_value_type VARCHAR, default_value_dialect VARCHAR)",
    "CREATE TABLE {schema}ducklake_table_stats(table_id BIGINT, record_count BIGINT, next_row_id BIGINT, file_size_bytes BIGINT)",
    "CREATE TABLE {schema}ducklake_table_column_stats(table_id BIGINT, column_id BIGINT, contains_null BOOLEAN, contains_nan BOOLEAN, min_value VARCHAR, max_value VARCHAR, extra_stats VARCHAR)",
    "CREATE TABLE {schema}ducklake_partition_info(partition_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT)",
    "CREATE TABLE {schema}ducklake_partition_column(partition_id BIGINT, table_id BIGINT, partition_key_index BIGINT, column_id BIGINT, transform VARCHAR)",
    "CREATE TABLE {schema}ducklake_file_partition_value(data_file_id BIGINT, table_id BIGINT, partition_key_index BIGINT, partition_value VARCHAR)",
    "CREATE TABLE {schema}ducklake_files_scheduled_for_deletion(data_file_id BIGINT, path VARCHAR, path_is_relative BOOLEAN, schedule_start TIMESTAMPTZ)",
    "CREATE TABLE {schema}ducklake_inlined_data_tables(table_id BIGINT, table_name VARCHAR, schema_version BIGINT)",
    "CREATE TABLE {schema}ducklake_column_mapping(mapping_id BIGINT, table_id BIGINT, type VARCHAR)",
    "CREATE TABLE {schema}ducklake_name_mapping(mapping_id BIGINT, column_id BIGINT, source_name VARCHAR, target_field_id BIGINT, parent_column BIGINT, is_partition BOOLEAN)",
    "CREATE TABLE {schema}ducklake_schema_versions(begin_snapshot BIGINT, schema_version BIGINT, table_id BIGINT)",
    "CREATE TABLE {schema}ducklake_macro(schema_id BIGINT, macro_id BIGINT, macro_name VARCHAR, begin_snapshot BIGINT, end_snapshot BIGINT)",
    "CREATE TABLE {schema}ducklake_macro_impl(macro_id BIGINT, impl_id BIGINT, dialect VARCHAR, sql VARCHAR, type VARCHAR)",
    "CREATE TABLE {schema}ducklake_macro_parameters(macro_id BIGINT, impl_id BIGINT, column_id BIGINT, parameter_name VARCHAR, parameter_type VARCHAR, default_value VARCHAR, default_value_type VARCHAR)",
    "CREATE TABLE {schema}ducklake_sort_info(sort_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT)",
    "CREATE TABLE {schema}ducklake_sort_expression(sort_id BIGINT, table_id BIGINT, sort_key_index BIGINT, expression VARCHAR, dialect VARCHAR, sort_direction VARCHAR, null_order VARCHAR)",
)

# What DuckLake 1.1 adds to those tables (at their end, NULL for rows that do not set them), and its new table.
ADDED_IN_1_1: dict[str, dict[str, str]] = {
    "ducklake_data_file": {"row_group_count": "BIGINT"},
    "ducklake_delete_file": {"row_group_count": "BIGINT"},
}
VIEW_COLUMN_TAG_1_1 = "CREATE TABLE {schema}ducklake_view_column_tag(view_id BIGINT, column_name VARCHAR, begin_snapshot BIGINT, end_snapshot BIGINT, key VARCHAR, value VARCHAR)"

_CREATE = re.compile(r"CREATE TABLE \{schema\}(\w+)\((.*)\)", re.DOTALL)


@cache
def table_columns() -> dict[str, dict[str, str]]:
    """Each 1.0 catalog table's columns, in order, with their DuckDB types (parsed once from CATALOG_TABLES)."""
    out: dict[str, dict[str, str]] = {}
    for stmt in CATALOG_TABLES:
        m = _CREATE.fullmatch(stmt)
        assert m is not None, stmt
        out[m.group(1)] = {part.split()[0]: part.split()[1] for part in m.group(2).split(",")}
    return out


def catalog_tables(version: str) -> tuple[str, ...]:
    """The CREATE TABLE statements of a new catalog of this spec version ('1.0' or '1.1')."""
    if version == SPEC_VERSION:
        return CATALOG_TABLES
    out = []
    for stmt, name in zip(CATALOG_TABLES, table_columns(), strict=True):
        added = ADDED_IN_1_1.get(name, {})
        out.append(stmt[:-1] + "".join(f", {c} {t}" for c, t in added.items()) + ")" if added else stmt)
    return (*out, VIEW_COLUMN_TAG_1_1)


# Spec versions DuckDB has written: 0.1/0.2/0.3 (DuckDB <= 1.4), 1.0 (DuckDB 1.5).
OLDER_VERSIONS = ("0.1", "0.2", "0.3", "0.4")
