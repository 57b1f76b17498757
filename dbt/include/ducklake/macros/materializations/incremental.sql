{#- Incremental models. The first run (or a full refresh) creates the table; later runs put the model's rows in a
    temporary Spark view, evolve the table's schema (on_schema_change, as DuckLake ALTERs: no file is rewritten) and
    apply the strategy. Everything between the BEGIN and the commit in ducklake_finish is ONE DuckLake snapshot:
    schema changes, deletes, new files and the change-feed cursors of ducklake_changes(). -#}
{% materialization incremental, adapter='ducklake', supported_languages=['sql', 'python'] %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing_relation = load_cached_relation(this) -%}
  {%- set unique_key = config.get('unique_key') -%}
  {#- with a unique_key and no strategy, merge: what a key is for -#}
  {%- set strategy = (config.get('incremental_strategy') or ('merge' if unique_key else 'append')) | lower -%}
  {#- dbt's own lookup: built-in strategies this adapter lists, or a project's get_incremental_<name>_sql macro -#}
  {%- set strategy_sql_macro_func = adapter.get_incremental_strategy_macro(context, strategy) -%}
  {%- set on_schema_change = incremental_validate_on_schema_change(config.get('on_schema_change'), default='ignore') -%}
  {%- set incremental_predicates = ducklake_predicate_list(config.get('predicates', none)
                                                          or config.get('incremental_predicates', none)) -%}
  {%- do ducklake_check_incremental_config(strategy, incremental_predicates) -%}
  {%- set tmp_relation = ducklake_tmp_relation(this) -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {#- a Python model's rows are a temporary view: the strategies take it as they take a SQL model's query -#}
  {%- set python_view = ducklake_run_python_model() -%}
  {%- set compiled_code = ('select * from ' ~ python_view) if python_view else compiled_code -%}

  {%- set rebuild = existing_relation is none or existing_relation.is_view or should_full_refresh()
                     or adapter.change_feed_needs_rebuild(this) -%}
  {%- if rebuild -%}
    {%- set compiled = ducklake_without_change_type(compiled_code) -%}
    {% call statement('main') -%}
      {{ create_table_as(False, target_relation, compiled) }}
    {%- endcall %}
  {%- else -%}
    {% call statement('create_tmp_relation') -%}
      {{ create_table_as(True, tmp_relation, compiled_code) }}
    {%- endcall %}
    {%- set change_type = adapter.change_type_column() -%}
    {%- set tmp_columns = adapter.get_columns_in_relation(tmp_relation) -%}
    {%- set has_change_type = change_type in (tmp_columns | map(attribute='name') | list) -%}
    {%- set data_relation = tmp_relation -%}
    {%- if has_change_type -%}
      {#- the model's columns without the change type, for the schema comparison -#}
      {%- set data_relation = ducklake_tmp_relation(this, '__dbt_tmp_data') -%}
      {% call statement('create_tmp_data_relation') -%}
        create or replace temporary view {{ data_relation }} as
        select {% for c in tmp_columns if c.name != change_type %}{{ c.quoted }}{{ ', ' if not loop.last }}{% endfor %}
        from {{ tmp_relation }}
      {%- endcall %}
    {%- endif -%}
    {%- set dest_columns = process_schema_changes(on_schema_change, data_relation, existing_relation) -%}
    {%- if not dest_columns -%}
      {%- set dest_columns = adapter.get_columns_in_relation(existing_relation) -%}
    {%- endif -%}
    {%- set strategy_arg_dict = ({
        'target_relation': target_relation,
        'temp_relation': tmp_relation,
        'unique_key': unique_key,
        'dest_columns': dest_columns | rejectattr('name', 'equalto', change_type) | list,
        'incremental_predicates': incremental_predicates,
        'has_change_type': has_change_type,
    }) -%}
    {% do ducklake_set_layout(target_relation) %}
    {% call statement('main') -%}
      {{ strategy_sql_macro_func(strategy_arg_dict) }}
    {%- endcall %}
  {%- endif %}
  {{ ducklake_finish(target_relation) }}
  {%- if not rebuild -%}
    {% call statement('drop_tmp_relation') -%}
      drop view if exists {{ tmp_relation }}
    {%- endcall %}
    {%- if has_change_type -%}
      {% call statement('drop_tmp_data_relation') -%}
        drop view if exists {{ data_relation }}
      {%- endcall %}
    {%- endif -%}
  {%- endif -%}
  {{ ducklake_drop_python_view(python_view) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}


{#- The temporary Spark view of a run's rows: unique per schema and model (one Spark session serves every thread). -#}
{% macro ducklake_tmp_relation(relation, suffix='__dbt_tmp') -%}
  {{ return(relation.incorporate(path={"identifier": relation.schema ~ '__' ~ relation.identifier ~ suffix},
                                 type='view').include(database=false, schema=false)) }}
{%- endmacro %}


{#- The rows of a first run without the change-type column of ducklake_changes() (it drives the strategies; it is
    not data of the model). -#}
{% macro ducklake_without_change_type(sql) -%}
  {%- set change_type = adapter.change_type_column() -%}
  {%- if change_type in sql -%}
    {%- set cols = adapter.query_columns(sql) -%}
    {%- if change_type in cols -%}
      {%- set keep = [] -%}
      {%- for c in cols if c != change_type -%}{%- do keep.append(adapter.quote(c)) -%}{%- endfor -%}
      {%- set keep = keep | join(', ') -%}
      {{ return('select ' ~ keep ~ ' from (' ~ sql ~ ') as dbt_ducklake_first_run where ' ~ change_type
                ~ " <> 'delete'") }}
    {%- endif -%}
  {%- endif -%}
  {{ return(sql) }}
{%- endmacro %}


{#- Strategies. Each renders statements the cursor stages in the model's transaction (see router.py). -#}

{% macro ducklake__get_incremental_append_sql(arg_dict) -%}
  {%- set cols = arg_dict['dest_columns'] | map(attribute='quoted') | join(', ') -%}
  insert into {{ arg_dict['target_relation'] }} ({{ cols }})
  select {{ cols }} from {{ arg_dict['temp_relation'] }}
  {%- if arg_dict['has_change_type'] %} where {{ adapter.change_type_column() }} <> 'delete'{% endif %}
{%- endmacro %}


{#- MERGE on unique_key (one column or a list), merge-on-read: target files are pruned by the source's keys and by
    incremental_predicates; matched rows get delete-file entries and their new versions, others are untouched.
    dbt-databricks' options (merge_options.sql) add conditions to the clauses, skip them, or act on the target rows
    the model's rows lack (WHEN NOT MATCHED BY SOURCE: then every target file is read). -#}
{% macro ducklake__get_incremental_merge_sql(arg_dict) -%}
  {%- set target = arg_dict['target_relation'] -%}
  {%- set source = arg_dict['temp_relation'] -%}
  {%- set unique_key = arg_dict['unique_key'] -%}
  {%- set dest_columns = arg_dict['dest_columns'] -%}
  {%- set change_type = adapter.change_type_column() -%}
  {%- set keys = ([unique_key] if unique_key is string else (unique_key or [])) | reject('equalto', '') | list -%}
  {%- if not keys -%}
    {{ ducklake__get_incremental_append_sql(arg_dict) }}
  {%- else -%}
    {%- set o = ducklake_merge_options() -%}
    {%- set dest, src = o.target_alias, o.source_alias -%}
    {%- if o.by_source_action and arg_dict['has_change_type'] -%}
      {%- do exceptions.raise_compiler_error(
            "not_matched_by_source_action on a ducklake_changes() model: its rows are only the upstream's changes, "
            ~ "so every unchanged row would be 'not matched by source'") -%}
    {%- endif -%}
    {%- set predicates = [] + ducklake_predicate_list(arg_dict['incremental_predicates']) -%}
    {%- for key in keys -%}
      {%- do predicates.append(src ~ '.' ~ key ~ ' = ' ~ dest ~ '.' ~ key) -%}
    {%- endfor -%}
    {%- set update_columns = get_merge_update_columns(config.get('merge_update_columns'),
                                                      config.get('merge_exclude_columns'), dest_columns) -%}
    {%- if update_columns is none -%}
      {%- set update_columns = dest_columns | map(attribute='quoted') | list -%}
    {%- endif -%}
    merge into {{ target }} as {{ dest }}
    using {{ source }} as {{ src }}
    on {{ predicates | join(' and ') }}
    {%- if arg_dict['has_change_type'] %}
    when matched and {{ src }}.{{ change_type }} = 'delete' then delete
    {%- endif %}
    {%- if update_columns and not o.skip_matched %}
    when matched {%- if o.matched_condition %} and ({{ o.matched_condition }}){% endif %} then update set
      {% for c in update_columns %}{{ c }} = {{ src }}.{{ c }}{{ ', ' if not loop.last }}{% endfor %}
    {%- endif %}
    {%- if not o.skip_not_matched %}
    when not matched {%- if arg_dict['has_change_type'] %} and {{ src }}.{{ change_type }} <> 'delete'{% endif %}
      {%- if o.not_matched_condition %} and ({{ o.not_matched_condition }}){% endif %} then insert
      ({% for c in dest_columns %}{{ c.quoted }}{{ ', ' if not loop.last }}{% endfor %})
      values ({% for c in dest_columns %}{{ src }}.{{ c.quoted }}{{ ', ' if not loop.last }}{% endfor %})
    {%- endif %}
    {%- if o.by_source_action %}
    when not matched by source {%- if o.by_source_condition %} and ({{ o.by_source_condition }}){% endif %}
      then {{ o.by_source_action }}
    {%- endif %}
  {%- endif -%}
{%- endmacro %}


{#- DELETE the target rows whose key is in the new rows (files pruned by the keys' values or range), then INSERT the
    new rows: both in the model's one snapshot. -#}
{% macro ducklake__get_incremental_delete_insert_sql(arg_dict) -%}
  {%- set target = arg_dict['target_relation'] -%}
  {%- set source = arg_dict['temp_relation'] -%}
  {%- set unique_key = arg_dict['unique_key'] -%}
  {%- set keys = ([unique_key] if unique_key is string else (unique_key or [])) | reject('equalto', '') | list -%}
  {%- if keys %}
  delete from {{ target }} as DBT_INTERNAL_DEST
  where ({% for k in keys %}DBT_INTERNAL_DEST.{{ k }}{{ ', ' if not loop.last }}{% endfor %})
    in (select {{ keys | join(', ') }} from {{ source }})
  {%- for p in arg_dict['incremental_predicates'] or [] %}
    and ({{ p }})
  {%- endfor %};
  {%- endif %}
  {{ ducklake__get_incremental_append_sql(arg_dict) }}
{%- endmacro %}


{#- INSERT OVERWRITE: on a partitioned table the partitions the new rows fall in are replaced (dynamic partitions,
    DuckLake partition values incl. transforms); an unpartitioned table is replaced whole. Old files end, none is
    rewritten. -#}
{% macro ducklake__get_incremental_insert_overwrite_sql(arg_dict) -%}
  {%- set cols = arg_dict['dest_columns'] | map(attribute='quoted') | join(', ') -%}
  {%- set partition_by = config.get('partition_by') -%}
  {%- if partition_by is string -%}{%- set partition_by = [partition_by] -%}{%- endif -%}
  insert overwrite table {{ arg_dict['target_relation'] }}
  {%- if partition_by %} partition ({{ adapter.partition_source_columns(partition_by) | join(', ') }}){% endif %}
  select {{ cols }} from {{ arg_dict['temp_relation'] }}
  {%- if arg_dict['has_change_type'] %} where {{ adapter.change_type_column() }} <> 'delete'{% endif %}
{%- endmacro %}


{#- microbatch: each batch replaces the target rows of its event-time window [start, end) and is its own snapshot
    (dbt runs one materialization per batch), so a failed batch is retried alone and the others stay. -#}
{% macro ducklake__get_incremental_microbatch_sql(arg_dict) -%}
  {%- set event_time = model.config.event_time -%}
  {%- set predicates = [] + (arg_dict['incremental_predicates'] or []) -%}
  {%- if model.batch and model.batch.event_time_start -%}
    {%- do predicates.append(event_time ~ " >= " ~ adapter.timestamp_literal(model.batch.event_time_start)) -%}
  {%- endif -%}
  {%- if model.batch and model.batch.event_time_end -%}
    {%- do predicates.append(event_time ~ " < " ~ adapter.timestamp_literal(model.batch.event_time_end)) -%}
  {%- endif -%}
  {%- if predicates -%}
  delete from {{ arg_dict['target_relation'] }}
  where {{ predicates | join(' and ') }};
  {%- endif %}
  {{ ducklake__get_incremental_append_sql(arg_dict) }}
{%- endmacro %}
