{#- A view is a DuckLake view (DuckDB SQL transpiled from the model, the Spark text kept in a tag) and a Spark view
    of the same name, created or replaced in one snapshot. -#}
{% materialization view, adapter='ducklake' %}
  {%- set target_relation = this.incorporate(type='view') -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {% call statement('main') -%}
    {{ get_create_view_as_sql(target_relation, sql) }}
  {%- endcall %}
  {{ ducklake_finish(target_relation, for_columns=false) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
