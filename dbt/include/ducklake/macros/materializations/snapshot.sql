{#- dbt snapshots: dbt's own snapshot materialization (timestamp and check strategies, check_cols, hard_deletes,
    dbt_valid_to_current, snapshot_meta_column_names, unique_key lists) over this adapter's pieces: the staging rows
    in a temporary Spark view, new columns as DuckLake ALTERs and the MERGE merge-on-read, all in one snapshot. -#}
{% materialization snapshot, adapter='ducklake' %}
  {%- set unique_key = config.get('unique_key') -%}
  {%- set exists, target_relation = get_or_create_relation(database=none, schema=model.schema,
                                                           identifier=model.get('alias') or model.get('name'),
                                                           type='table') -%}
  {%- if not target_relation.is_table -%}
    {% do exceptions.relation_wrong_type(target_relation, 'table') %}
  {%- endif -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {%- set strategy = strategy_dispatch(config.get('strategy'))(model, "snapshotted_data", "source_data",
                                                               model['config'], exists) -%}
  {%- if config.get('strategy') == 'ducklake' -%}
    {%- set final_sql = ducklake_snapshot_replay(target_relation, exists) -%}
  {%- elif not exists -%}
    {%- set select_sql = build_snapshot_table(strategy, model['compiled_code']) -%}
    {%- set final_sql = create_table_as(False, target_relation, select_sql) -%}
  {%- else -%}
    {%- set columns = config.get('snapshot_table_column_names') or get_snapshot_table_column_names() -%}
    {{ adapter.assert_valid_snapshot_target_given_strategy(target_relation, columns, strategy) }}
    {%- set select_sql = snapshot_staging_table(strategy, sql, target_relation) -%}
    {%- set staging = build_snapshot_staging_table(strategy, sql, target_relation) -%}
    {#- dbt's working columns of the staging rows are not snapshot columns -#}
    {%- set internal = ['dbt_change_type', 'dbt_unique_key'] -%}
    {%- if unique_key | is_list -%}
      {%- for key in strategy.unique_key -%}{%- do internal.append('dbt_unique_key_' ~ loop.index) -%}{%- endfor -%}
    {%- endif -%}
    {%- set missing = [] -%}
    {%- for c in adapter.get_missing_columns(staging, target_relation) if c.name | lower not in internal -%}
      {%- do missing.append(c) -%}
    {%- endfor -%}
    {%- do create_columns(target_relation, missing) -%}
    {%- set insert_cols = [] -%}
    {%- for c in adapter.get_columns_in_relation(staging) if c.name | lower not in internal -%}
      {%- do insert_cols.append(adapter.quote(c.name)) -%}
    {%- endfor -%}
    {%- set final_sql = snapshot_merge_sql(target=target_relation, source=staging, insert_cols=insert_cols) -%}
  {%- endif -%}
  {%- if select_sql is defined -%}
    {{ check_time_data_types(select_sql) }}
  {%- endif -%}
  {% call statement('main') -%}
    {{ final_sql }}
  {%- endcall %}
  {% do persist_docs(target_relation, model) %}
  {% do apply_grants(target_relation, config.get('grants'), should_revoke=false) %}
  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ adapter.commit() }}
  {%- if staging is defined -%}
    {% do post_snapshot(staging) %}
  {%- endif -%}
  {%- if config.get('strategy') == 'ducklake' -%}
    {% do post_snapshot(ducklake_tmp_relation(target_relation, '__dbt_replay')) %}
    {% do post_snapshot(ducklake_tmp_relation(target_relation, '__dbt_versions')) %}
  {%- endif -%}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}


{#- Temporary relations are Spark temporary views: no schema in the name, the schema folded into the identifier. -#}
{% macro ducklake__make_temp_relation(base_relation, suffix='__dbt_tmp') -%}
  {{ return(ducklake_tmp_relation(base_relation, suffix)) }}
{%- endmacro %}


{% macro ducklake__post_snapshot(staging_relation) -%}
  {% call statement('drop_snapshot_staging') -%}
    drop view if exists {{ staging_relation }}
  {%- endcall %}
{%- endmacro %}


{#- Close the current version of changed and deleted rows, insert new versions: source columns named as s.<col>. -#}
{% macro ducklake__snapshot_merge_sql(target, source, insert_cols) -%}
  {%- set columns = config.get("snapshot_table_column_names") or get_snapshot_table_column_names() -%}
  {%- set valid_to = 'DBT_INTERNAL_DEST.' ~ columns.dbt_valid_to -%}
  merge into {{ target.render() }} as DBT_INTERNAL_DEST
  using {{ source }} as DBT_INTERNAL_SOURCE
  on DBT_INTERNAL_SOURCE.{{ columns.dbt_scd_id }} = DBT_INTERNAL_DEST.{{ columns.dbt_scd_id }}
  when matched
    {%- if config.get('dbt_valid_to_current') %}
    and ({{ valid_to }} = {{ config.get('dbt_valid_to_current') }} or {{ valid_to }} is null)
    {%- else %}
    and {{ valid_to }} is null
    {%- endif %}
    and DBT_INTERNAL_SOURCE.dbt_change_type in ('update', 'delete')
    then update set {{ columns.dbt_valid_to }} = DBT_INTERNAL_SOURCE.{{ columns.dbt_valid_to }}
  when not matched and DBT_INTERNAL_SOURCE.dbt_change_type = 'insert'
    then insert ({{ insert_cols | join(', ') }})
    values ({% for c in insert_cols %}DBT_INTERNAL_SOURCE.{{ c }}{{ ', ' if not loop.last }}{% endfor %})
{%- endmacro %}


{#- The `ducklake` strategy: a snapshot of a DuckLake table that replays its change feed, so every version between two
    `dbt snapshot` runs is kept, valid from the commit time of the DuckLake snapshot that made it to the next one.

      {% snapshot customers_history %}
      {{ config(strategy='ducklake', unique_key='id', hard_deletes='invalidate') }}
      select * from {{ ducklake_changes(source('shop', 'raw_customers')) }}
      {% endsnapshot %}

    The select may transform columns but keeps the three _ducklake_* columns of ducklake_changes(). -#}
{% macro snapshot_ducklake_strategy(node, snapshotted_rel, current_rel, model_config, target_exists) -%}
  {%- set columns = config.get('snapshot_table_column_names') or get_snapshot_table_column_names() -%}
  {{ return({'unique_key': config.get('unique_key'), 'updated_at': '_ducklake_commit_time',
             'row_changed': 'true', 'scd_id': columns.dbt_scd_id,
             'invalidate_hard_deletes': config.get('hard_deletes') == 'invalidate',
             'hard_deletes': config.get('hard_deletes') or 'ignore'}) }}
{%- endmacro %}


{#- Runs the staging statements and returns the statements that commit the run (see snapshot_ducklake_strategy). -#}
{% macro ducklake_snapshot_replay(target_relation, exists) -%}
  {%- set columns = config.get('snapshot_table_column_names') or get_snapshot_table_column_names() -%}
  {%- set unique_key = config.get('unique_key') -%}
  {%- set keys = [unique_key] if unique_key is string else unique_key -%}
  {%- set hard_deletes = config.get('hard_deletes') or 'ignore' -%}
  {%- set current = config.get('dbt_valid_to_current') -%}
  {%- set ct, sn, tm = adapter.change_type_column(), '_ducklake_snapshot_id', '_ducklake_commit_time' -%}
  {%- set found = adapter.query_columns(sql) -%}
  {%- if ct not in found or sn not in found or tm not in found -%}
    {{ exceptions.raise_compiler_error("snapshot " ~ model.name ~ " (strategy 'ducklake') must select from "
       ~ "ducklake_changes(<a DuckLake table>) and keep its columns " ~ ct ~ ", " ~ sn ~ " and " ~ tm) }}
  {%- endif -%}
  {%- set data_cols = [] -%}
  {%- for c in found if c not in (ct, sn, tm) -%}{%- do data_cols.append(adapter.quote(c)) -%}{%- endfor -%}
  {%- set k = keys | join(', ') -%}
  {%- set changes = ducklake_tmp_relation(target_relation, '__dbt_replay') -%}
  {%- set versions = ducklake_tmp_relation(target_relation, '__dbt_versions') -%}
  {#- one change per key and snapshot (a delete and an insert of one key in one snapshot is an update) -#}
  {% call statement('replay_changes') -%}
    create or replace temporary view {{ changes }} as
    select * from (
      select *, row_number() over (partition by {{ k }}, {{ sn }}
                                   order by case when {{ ct }} = 'delete' then 1 else 0 end) as __ducklake_n
      from ({{ sql }}) as replayed
    ) where __ducklake_n = 1 {%- if hard_deletes == 'ignore' %} and {{ ct }} <> 'delete'{% endif %}
  {%- endcall %}
  {#- each change opens a version, valid until the key's next change -#}
  {% call statement('replay_versions') -%}
    create or replace temporary view {{ versions }} as
    select {{ data_cols | join(', ') }},
           md5(concat_ws('|', {% for key in keys %}coalesce(cast({{ key }} as string), ''), {% endfor %}cast({{ tm }} as string))) as {{ columns.dbt_scd_id }},
           {{ tm }} as {{ columns.dbt_updated_at }},
           {{ tm }} as {{ columns.dbt_valid_from }},
           coalesce(lead({{ tm }}) over (partition by {{ k }} order by {{ sn }}),
                    {{ current if current else 'cast(null as timestamp)' }}) as {{ columns.dbt_valid_to }}
           {%- if hard_deletes == 'new_record' %},
           case when {{ ct }} = 'delete' then 'True' else 'False' end as {{ columns.dbt_is_deleted }}
           {%- endif %},
           {{ ct }} as __ducklake_change
    from {{ changes }}
  {%- endcall %}
  {%- set keep = "__ducklake_change <> 'delete'" if hard_deletes != 'new_record' else 'true' -%}
  {%- set out_cols = [] -%}
  {%- for c in adapter.get_columns_in_relation(versions) if c.name != '__ducklake_change' -%}
    {%- do out_cols.append(adapter.quote(c.name)) -%}
  {%- endfor -%}
  {%- if not exists -%}
    {{ return(create_table_as(False, target_relation, 'select ' ~ out_cols | join(', ') ~ ' from ' ~ versions
                                                       ~ ' where ' ~ keep)) }}
  {%- endif -%}
  {%- set missing = [] -%}
  {%- for c in adapter.get_missing_columns(versions, target_relation) if c.name != '__ducklake_change' -%}
    {%- do missing.append(c) -%}
  {%- endfor -%}
  {%- do create_columns(target_relation, missing) -%}
  {%- set valid_to = 'DBT_INTERNAL_DEST.' ~ columns.dbt_valid_to -%}
  {#- the open version of each changed key closes at its first change; then the new versions -#}
  {%- set final -%}
    merge into {{ target_relation.render() }} as DBT_INTERNAL_DEST
    using (select {{ k }}, min({{ tm }}) as __ducklake_close_at from {{ changes }} group by {{ k }}) as DBT_INTERNAL_SOURCE
    on {% for key in keys %}DBT_INTERNAL_DEST.{{ key }} = DBT_INTERNAL_SOURCE.{{ key }} and {% endfor -%}
       ({{ valid_to }} is null {%- if current %} or {{ valid_to }} = {{ current }}{% endif %})
    when matched then update set {{ columns.dbt_valid_to }} = DBT_INTERNAL_SOURCE.__ducklake_close_at;
    insert into {{ target_relation.render() }} ({{ out_cols | join(', ') }})
    select {{ out_cols | join(', ') }} from {{ versions }} where {{ keep }}
  {%- endset -%}
  {{ return(final) }}
{%- endmacro %}
