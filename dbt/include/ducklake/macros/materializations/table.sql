{#- A table is replaced in ONE snapshot (CREATE OR REPLACE, comments in the same commit): readers see the old
    table until the new one is committed, never neither. -#}
{% materialization table, adapter='ducklake', supported_languages=['sql', 'python'] %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {%- set python_view = ducklake_run_python_model() -%}
  {% call statement('main') -%}
    {{ create_table_as(False, target_relation, ('select * from ' ~ python_view) if python_view else compiled_code) }}
  {%- endcall %}
  {{ ducklake_finish(target_relation) }}
  {{ ducklake_drop_python_view(python_view) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
