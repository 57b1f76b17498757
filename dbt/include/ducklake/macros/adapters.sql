{#- DDL as dbt-spark renders it, with what DuckLake adds: CREATE OR REPLACE in one statement (one snapshot),
    partition transforms, comments. The cursor routes these statements to the lake (see router.py). -#}

{% macro ducklake__create_table_as(temporary, relation, compiled_code, language='sql') -%}
  {%- if language != 'sql' -%}
    {{ exceptions.raise_compiler_error("create_table_as takes SQL (model " ~ relation ~ " is " ~ language ~ "): "
        ~ "the table and incremental materializations run Python models first (ducklake_run_python_model)") }}
  {%- endif -%}
  {%- if temporary -%}
    {{ create_temporary_view(relation, compiled_code) }}
  {%- else -%}
    {%- set contract_config = config.get('contract') -%}
    {%- if contract_config.enforced -%}
      {{ get_assert_columns_equivalent(compiled_code) }}
      {%- set compiled_code = get_select_subquery(compiled_code) %}
    {%- endif %}
    create or replace table {{ relation }}
    {%- if contract_config.enforced %} {{ get_table_columns_and_constraints() }}{% endif %}
    {{ ducklake_partition_clause() }}
    {{ comment_clause() }}
    {{ ducklake_tblproperties_clause() }}
    as
    {{ compiled_code }}
  {%- endif -%}
{%- endmacro %}

{% macro ducklake_partition_clause() -%}
  {%- set partition_by = config.get('partition_by', validator=validation.any[list, basestring]) -%}
  {%- if partition_by is not none -%}
    {%- if partition_by is string -%}{%- set partition_by = [partition_by] -%}{%- endif -%}
    partitioned by ({{ partition_by | join(', ') }})
  {%- endif -%}
{%- endmacro %}

{#- One TBLPROPERTIES clause for a new table (Spark takes one): its DuckLake types and its layout. -#}
{% macro ducklake_tblproperties_clause() -%}
  {%- set props = ducklake_types_properties() + ducklake_layout_properties() -%}
  {%- if props -%}
    tblproperties ({{ props | join(', ') }})
  {%- endif -%}
{%- endmacro %}

{#- `ducklake_types: {column: type}` (DuckLake type names; nested fields as col.element, col.key, col.value,
    col.field): the DuckLake types a new table's columns are stored as, e.g. uuid for a text column of UUIDs. -#}
{% macro ducklake_types_properties() -%}
  {%- set types = config.get('ducklake_types') -%}
  {%- if types -%}
    {%- if types is not mapping -%}
      {{ exceptions.raise_compiler_error("ducklake_types must be a mapping of column to DuckLake type, e.g. "
          ~ "{id: uuid}; got " ~ types) }}
    {%- endif -%}
    {{ return(["'ducklake.types' = '" ~ (types.items() | map('join', '=') | join(',')) ~ "'"]) }}
  {%- endif -%}
  {{ return([]) }}
{%- endmacro %}

{#- The table's layout (docs/guide/table-layout.md): `sorted_by` (DuckDB sort keys, a string or a list) and the
    write options DuckDB's set_option takes per table. -#}
{% macro ducklake_layout_properties() -%}
  {%- set props = [] -%}
  {%- set sorted_by = config.get('sorted_by') -%}
  {%- if sorted_by is not none -%}
    {%- set keys = [sorted_by] if sorted_by is string else sorted_by -%}
    {%- do props.append("'ducklake.sorted_by' = '" ~ ducklake_escape(keys | join(', ')) ~ "'") -%}
  {%- endif -%}
  {%- for name in ['parquet_compression', 'parquet_compression_level', 'parquet_row_group_size',
                   'parquet_row_group_size_bytes', 'parquet_version', 'target_file_size'] -%}
    {%- set value = config.get(name) -%}
    {%- if value is not none -%}
      {%- do props.append("'ducklake.option." ~ name ~ "' = '" ~ ducklake_escape(value | string) ~ "'") -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(props) }}
{%- endmacro %}

{#- The layout configs that are set, by name (a seed's layout, adapter.load_seed). -#}
{% macro ducklake_layout_config() -%}
  {%- set layout = {} -%}
  {%- for name in ['sorted_by', 'parquet_compression', 'parquet_compression_level', 'parquet_row_group_size',
                   'parquet_row_group_size_bytes', 'parquet_version', 'target_file_size'] -%}
    {%- if config.get(name) is not none -%}
      {%- do layout.update({name: config.get(name)}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(layout) }}
{%- endmacro %}

{#- An existing table's layout brought to the model's config (staged only where it differs), before its rows are
    written: incremental runs sort and lay out their files as the table says. -#}
{% macro ducklake_set_layout(relation) -%}
  {%- set props = ducklake_layout_properties() -%}
  {%- if props -%}
    {%- call statement('set_layout') -%}
      alter table {{ relation }} set tblproperties ({{ props | join(', ') }})
    {%- endcall -%}
  {%- endif -%}
{%- endmacro %}

{% macro ducklake__create_view_as(relation, sql) -%}
  create or replace view {{ relation }}
  {{ comment_clause() }}
  {%- set contract_config = config.get('contract') -%}
  {%- if contract_config.enforced -%}
    {{ get_assert_columns_equivalent(sql) }}
  {%- endif %}
  as
  {{ sql }}
{%- endmacro %}

{% macro ducklake__alter_relation_comment(relation, comment) -%}
  comment on {{ 'view' if relation.is_view else 'table' }} {{ relation }} is '{{ ducklake_escape(comment) }}'
{%- endmacro %}

{% macro ducklake__alter_column_comment(relation, column_dict) -%}
  {#- documented columns the relation lacks are skipped by the adapter (the table may be staged in this commit) -#}
  {%- for column_name in column_dict if column_dict[column_name]['description'] -%}
    {%- set comment = column_dict[column_name]['description'] -%}
    {%- call statement('alter_column_comment_' ~ loop.index) -%}
      comment on column {{ relation }}.{{ adapter.quote(column_name) if column_dict[column_name]['quote'] else column_name }} is '{{ ducklake_escape(comment) }}'
    {%- endcall -%}
  {%- endfor -%}
{%- endmacro %}

{% macro ducklake__persist_docs(relation, model, for_relation, for_columns) -%}
  {%- if for_relation and config.persist_relation_docs() and model.description -%}
    {%- do run_query(alter_relation_comment(relation, model.description)) -%}
  {%- endif -%}
  {%- if for_columns and config.persist_column_docs() and model.columns -%}
    {%- do alter_column_comment(relation, model.columns) -%}
  {%- endif -%}
{%- endmacro %}

{% macro ducklake_escape(text) -%}
  {{- text | replace('\\', '\\\\') | replace("'", "\\'") -}}
{%- endmacro %}

{% macro ducklake__get_relation_last_modified(information_schema, relations) -%}
  {%- call statement('last_modified', fetch_result=True) -%}
    {%- for relation in relations %}
      {%- set changed = adapter.last_changed(relation) %}
      select '{{ relation.schema }}' as schema, '{{ relation.identifier }}' as identifier,
             {% if changed is none %}cast(null as timestamp){% else %}timestamp'{{ changed.strftime("%Y-%m-%d %H:%M:%S.%f") }}'{% endif %} as last_modified,
             current_timestamp() as snapshotted_at
      {% if not loop.last %}union all{% endif %}
    {%- endfor %}
  {%- endcall -%}
  {{ return(load_result('last_modified')) }}
{%- endmacro %}

{#- The end of every materialization: docs, post-hooks, then ONE commit for the model's snapshot (a model's
    `data_inlining_row_limit` decides there whether its small inserts are inlined). A table model with
    `ducklake_compact: true` (or a dict of ducklake_merge_adjacent_files arguments) then merges its small files, as
    DuckDB's ducklake_merge_adjacent_files does (a snapshot of its own; time travel unchanged), except in a
    write-audit-publish build (one snapshot for everything). -#}
{% macro ducklake_finish(relation, for_columns=true) -%}
  {%- set inlining = config.get('data_inlining_row_limit') -%}
  {%- if inlining is not none and relation.type != 'view' -%}
    {% do adapter.ducklake_inlining_limit(relation, inlining) %}
  {%- endif -%}
  {% do persist_docs(relation, model, for_columns=for_columns) %}
  {% do apply_grants(relation, config.get('grants'), should_revoke=false) %}
  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ adapter.commit() }}
  {%- set compact = config.get('ducklake_compact') -%}
  {%- if compact and relation.type != 'view' and adapter.ducklake_write_audit_publish() -%}
    {% do log("ducklake_compact of " ~ relation ~ " skipped: a write-audit-publish build publishes one snapshot "
              ~ "(compact with dbt run-operation ducklake_merge_adjacent_files after it)", info=true) %}
  {%- elif compact and relation.type != 'view' -%}
    {%- set args = compact if compact is mapping else {} -%}
    {% do ducklake_merge_adjacent_files(schema=relation.schema, table=relation.identifier,
                                        target_file_size=args.get('target_file_size'),
                                        min_file_size=args.get('min_file_size'), max_file_size=args.get('max_file_size'),
                                        max_compacted_files=args.get('max_compacted_files')) %}
  {%- endif -%}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
{%- endmacro %}

{#- Columns added and removed as DuckLake schema evolution (no file is rewritten). Added columns named by the model's
    ducklake_types (or their nested fields) get those DuckLake types, as a new table's columns do. -#}
{% macro ducklake__alter_relation_add_remove_columns(relation, add_columns, remove_columns) -%}
  {%- if add_columns -%}
    {%- set types = config.get('ducklake_types') if config is defined else none -%}
    {%- set added = add_columns | map(attribute='name') | map('lower') | list -%}
    {%- set wanted = [] -%}
    {%- if types is mapping -%}
      {%- for k, v in types.items() if (k | lower).split('.')[0] in added -%}
        {%- do wanted.append(k ~ '=' ~ v) -%}
      {%- endfor -%}
    {%- endif -%}
    {%- call statement('add_columns') -%}
      alter table {{ relation.render() }} add columns (
        {%- for column in add_columns %}{{ column.quoted }} {{ column.data_type }}{{ ', ' if not loop.last }}{% endfor -%}
      )
      {%- if wanted %} tblproperties ('ducklake.types' = '{{ wanted | join(",") }}'){% endif %}
    {%- endcall -%}
  {%- endif -%}
  {%- for column in remove_columns or [] -%}
    {%- call statement('drop_column_' ~ loop.index) -%}
      alter table {{ relation.render() }} drop column {{ column.quoted }}
    {%- endcall -%}
  {%- endfor -%}
{%- endmacro %}

{#- on_schema_change inside nested columns, as DuckLake evolves them (no file is rewritten; old files read a new field
    as NULL): append_new_columns also adds the struct fields the model's nested columns gained (ADD COLUMN s.f, in
    list elements and map values too), never dropping or changing one; sync_all_columns changes a nested column's
    type through alter_column_type below, which adds, drops and widens its fields. A rename is not detected (it
    reads as a drop and an add): rename first with the ducklake_rename_column run-operation. -#}
{% macro ducklake__sync_column_schemas(on_schema_change, target_relation, schema_changes_dict) -%}
  {%- if on_schema_change == 'append_new_columns' -%}
    {%- set fields = [] -%}
    {%- for changed in schema_changes_dict['new_target_types'] -%}
      {%- do fields.extend(adapter.nested_fields_added(target_relation, changed['column_name'],
                                                       changed['new_type'])) -%}
    {%- endfor -%}
    {%- if fields -%}
      {%- call statement('add_nested_fields') -%}
        alter table {{ target_relation.render() }} add columns ({{ fields | join(', ') }})
      {%- endcall -%}
      {% do log("In " ~ target_relation ~ ": nested fields added: " ~ fields | join(', ')) %}
    {%- endif -%}
  {%- endif -%}
  {% do default__sync_column_schemas(on_schema_change, target_relation, schema_changes_dict) %}
{%- endmacro %}

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

{#- A nested column's new type (sync_all_columns) adds, drops and widens its fields; a top-level type only widens. -#}
{% macro ducklake__alter_column_type(relation, column_name, new_column_type) -%}
  {%- call statement('alter_column_type') -%}
    alter table {{ relation.render() }} alter column {{ adapter.quote(column_name) }} type {{ new_column_type }}
  {%- endcall -%}
{%- endmacro %}

{#- listagg with its order honoured (dbt-spark ignores it): Spark 4's WITHIN GROUP, or a sorted slice for a limit -#}
{% macro ducklake__listagg(measure, delimiter_text, order_by_clause, limit_num) -%}
  {{- return(adapter.listagg_sql(measure, delimiter_text, order_by_clause, limit_num)) -}}
{%- endmacro %}


{#- dbt-spark's version returns the rows of DESCRIBE EXTENDED (its Python side parses them); dbt's own macros, such as
    the hard_deletes='new_record' staging, read column objects with .name from it. -#}
{% macro ducklake__get_columns_in_relation(relation) -%}
  {{ return(adapter.get_columns_in_relation(relation)) }}
{%- endmacro %}

{#- DuckLake has no privileges: access is the catalog database's and the data path's. `grants` is said to be ignored
    once per run (a warning, so --warn-error makes it an error), not silently dropped. -#}
{% macro ducklake__apply_grants(relation, grant_config, should_revoke=True) -%}
  {%- if grant_config and adapter.grants_warning_due() -%}
    {% do exceptions.warn("dbt-ducklake: the `grants` config is ignored (first seen on " ~ relation ~ "): DuckLake has "
        ~ "no privileges. Control access with the catalog database's users and roles (PostgreSQL) and the data "
        ~ "path's file permissions.") %}
  {%- endif -%}
{%- endmacro %}

{#- A Python model (models/*.py, `def model(dbt, session)`) runs in the adapter's SparkSession; its DataFrame (or a
    pandas DataFrame / pyarrow Table) becomes a temporary view, returned here, that the materialization reads as it
    reads a SQL model's query. none for a SQL model. -#}
{% macro ducklake_run_python_model() -%}
  {%- if model['language'] != 'python' -%}{{ return(none) }}{%- endif -%}
  {{ return(adapter.ducklake_python_model(model, compiled_code)) }}
{%- endmacro %}

{% macro ducklake_drop_python_view(python_view) -%}
  {%- if python_view -%}
    {% call statement('drop_python_view') -%} drop view if exists {{ python_view }} {%- endcall %}
  {%- endif -%}
{%- endmacro %}
