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

{#- Rewrites the data files whose deleted fraction is at least delete_threshold (0..1; default: the
    rewrite_delete_threshold option, else 0.95) without their deleted rows, as DuckDB's ducklake_rewrite_data_files. -#}
{% macro ducklake_rewrite_data_files(schema=none, table=none, delete_threshold=none, schema_name=none,
                                     table_name=none) %}
  {% do adapter.ducklake_maintenance('rewrite_data_files', schema=schema, table=table,
                                     delete_threshold=delete_threshold, schema_name=schema_name,
                                     table_name=table_name) %}
{% endmacro %}

{#- DuckDB's CHECKPOINT of a lake: flush inlined data, expire snapshots, merge adjacent files, rewrite data files,
    clean up old files, delete orphaned files, in that order, each with the lake's options; logs what each did.
    As a model's post-hook it must run after the model's commit:
    post_hook={'sql': '{{ ducklake_checkpoint() }}', 'transaction': false}. Renders no SQL. -#}
{% macro ducklake_checkpoint(force=false) %}
  {% if execute %}{% do adapter.ducklake_maintenance('checkpoint', force=force) %}{% endif %}
{% endmacro %}

{#- Lists every data and delete file the catalog lists (for any snapshot it holds) that is missing or of another
    size than listed; footers=true also reads each footer (not Parquet, unreadable, another record count). Fails
    when it finds one; changes nothing. -#}
{% macro ducklake_check_files(schema=none, table=none, footers=false, schema_name=none, table_name=none) %}
  {% do adapter.ducklake_maintenance('check_files', schema=schema, table=table, footers=footers,
                                     schema_name=schema_name, table_name=table_name) %}
{% endmacro %}
