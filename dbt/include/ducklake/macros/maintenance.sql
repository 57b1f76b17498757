{#- Lake maintenance as run-operations, with DuckDB's ducklake_* semantics and parameter names, e.g.
    dbt run-operation ducklake_expire_snapshots --args '{older_than: "2026-01-31 00:00:00+00:00"}'
    dbt run-operation ducklake_merge_adjacent_files --args '{schema: main, table: events, max_compacted_files: 10}'
    cleanup_all / table_name / schema_name are DuckDB's names for all / table / schema. -#}

{% macro ducklake_expire_snapshots(versions=none, older_than=none, dry_run=false) %}
  {% do adapter.ducklake_maintenance('expire_snapshots', versions=versions, older_than=older_than, dry_run=dry_run) %}
{% endmacro %}

{% macro ducklake_cleanup_old_files(older_than=none, all=none, dry_run=false, cleanup_all=none) %}
  {% do adapter.ducklake_maintenance('cleanup_old_files', older_than=older_than, all=all, cleanup_all=cleanup_all,
                                     dry_run=dry_run) %}
{% endmacro %}

{% macro ducklake_delete_orphaned_files(older_than=none, all=none, dry_run=false, cleanup_all=none, force=false) %}
  {% do adapter.ducklake_maintenance('delete_orphaned_files', older_than=older_than, all=all, cleanup_all=cleanup_all,
                                     dry_run=dry_run, force=force) %}
{% endmacro %}

{% macro ducklake_merge_adjacent_files(schema=none, table=none, target_file_size=none, min_file_size=none,
                                       max_file_size=none, max_compacted_files=none) %}
  {% do adapter.ducklake_maintenance('merge_adjacent_files', schema=schema, table=table,
                                     target_file_size=target_file_size, min_file_size=min_file_size,
                                     max_file_size=max_file_size, max_compacted_files=max_compacted_files) %}
{% endmacro %}

{% macro ducklake_flush_inlined_data(schema=none, table=none, schema_name=none, table_name=none) %}
  {% do adapter.ducklake_maintenance('flush_inlined_data', schema=schema, table=table, schema_name=schema_name,
                                     table_name=table_name) %}
{% endmacro %}

{#- Lists every data and delete file the catalog lists (for any snapshot it holds) that is missing or of another
    size than listed; footers=true also reads each footer (not Parquet, unreadable, another record count). Fails
    when it finds one; changes nothing. -#}
{% macro ducklake_check_files(schema=none, table=none, footers=false, schema_name=none, table_name=none) %}
  {% do adapter.ducklake_maintenance('check_files', schema=schema, table=table, footers=footers,
                                     schema_name=schema_name, table_name=table_name) %}
{% endmacro %}

{#- Renames a column, or a field of a nested column given by its path (payload.customer.name; list elements and map
    values as element / value), as DuckDB's ALTER TABLE ... RENAME does: the field keeps its id, so every older file
    reads it under the new name. One snapshot. on_schema_change cannot tell a rename from a drop and an add: rename
    with this before running the model that uses the new name, e.g.
    dbt run-operation ducklake_rename_column --args '{table: orders, column: payload.old_name, new_name: new_name}'
    table: a name in the target schema, schema.table, or a relation. -#}
{% macro ducklake_rename_column(table, column, new_name, schema=none) %}
  {%- if table is string -%}
    {%- set parts = table.split('.') -%}
    {%- set relation = api.Relation.create(schema=(parts[0] if parts | length > 1 else (schema or target.schema)),
                                           identifier=parts[-1], type='table') -%}
  {%- else -%}
    {%- set relation = table -%}
  {%- endif -%}
  {%- set path = [] -%}
  {%- for part in column.split('.') -%}{%- do path.append(adapter.quote(part | trim)) -%}{%- endfor -%}
  {% call statement('ducklake_rename_column') -%}
    alter table {{ relation.include(database=false).render() }} rename column {{ path | join('.') }} to {{ adapter.quote(new_name) }}
  {%- endcall %}
  {% do adapter.commit() %}
  {% do log("ducklake_rename_column: " ~ relation ~ " " ~ column ~ " renamed to " ~ new_name, info=true) %}
{% endmacro %}
