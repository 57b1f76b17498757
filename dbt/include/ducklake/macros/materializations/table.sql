{#- A table is replaced in ONE snapshot (CREATE OR REPLACE, comments in the same commit): readers see the old
    table until the new one is committed, never neither. -#}
{% materialization table, adapter='ducklake' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {% call statement('main') -%}
    {{ create_table_as(False, target_relation, compiled_code, model['language']) }}
  {%- endcall %}
  {{ ducklake_finish(target_relation) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
