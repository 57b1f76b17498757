{#- A seed becomes a table in one snapshot: the CSV rows (read by dbt on the driver) become a Spark DataFrame with the
    inferred or configured column types, written by Spark like any table. -#}
{% materialization seed, adapter='ducklake' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set agate_table = load_agate_table() -%}
  {%- do store_result('agate_table', response='OK', agate_table=agate_table) -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {%- set column_override = model['config'].get('column_types', {}) -%}
  {%- set rows = adapter.load_seed(target_relation, agate_table, column_override, config.get('quote_columns'),
                                   ducklake_layout_config()) -%}
  {% call noop_statement('main', 'INSERT ' ~ rows, 'INSERT', rows) %}
    -- {{ rows }} rows loaded into {{ target_relation }}
  {% endcall %}
  {{ ducklake_finish(target_relation) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
