{#- A view is a DuckLake view (DuckDB SQL transpiled from the model, the Spark text kept in a tag) and a Spark view
    of the same name, created or replaced in one snapshot. Its column docs are kept where the lake has a place for
    them (DuckLake 1.1's view column tags; a 1.0 lake has none, and the adapter skips them there). -#}
{% materialization view, adapter='ducklake' %}
  {%- set target_relation = this.incorporate(type='view') -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {% call statement('main') -%}
    {{ get_create_view_as_sql(target_relation, sql) }}
  {%- endcall %}
  {{ ducklake_finish(target_relation) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
