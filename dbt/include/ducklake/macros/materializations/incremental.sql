{#- Incremental models: the first run (or a full refresh) creates the table in one snapshot; later runs apply the
    strategy in one snapshot. -#}
{% materialization incremental, adapter='ducklake' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing_relation = load_cached_relation(this) -%}
  {%- set strategy = config.get('incremental_strategy') or 'append' -%}
  {%- if strategy not in adapter.valid_incremental_strategies() -%}
    {{ exceptions.raise_compiler_error("incremental_strategy '" ~ strategy ~ "' is not supported; choose one of: "
       ~ adapter.valid_incremental_strategies() | join(', ')) }}
  {%- endif -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {%- if existing_relation is none or existing_relation.is_view or should_full_refresh() -%}
    {% call statement('main') -%}
      {{ create_table_as(False, target_relation, compiled_code) }}
    {%- endcall %}
  {%- else -%}
    {%- set dest_columns = adapter.get_columns_in_relation(target_relation) -%}
    {%- set cols = dest_columns | map(attribute='quoted') | join(', ') -%}
    {% call statement('main') -%}
      insert into {{ target_relation }} ({{ cols }})
      select {{ cols }} from ({{ compiled_code }}) as dbt_incremental_source
    {%- endcall %}
  {%- endif %}
  {{ ducklake_finish(target_relation) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
