{#- dbt clone. A DuckLake clone is a COPY of the deferred table, written as a new table in one snapshot.
    Why not share the source's files (metadata-only): DuckDB's ducklake_cleanup_old_files deletes every path that
    ducklake_files_scheduled_for_deletion lists, and rebuilding the source schedules its files, so a clone whose
    catalog rows point at them reads missing files once the source's lake is cleaned. A view pinned to the source's
    snapshot breaks the same way once ducklake_expire_snapshots removes that snapshot. A copy is the one clone that
    keeps reading the source's rows after both. A relation that is not a table (a view) is cloned as a view. -#}
{% macro ducklake__can_clone_table() %}
  {{ return(True) }}
{% endmacro %}

{% macro ducklake__create_or_replace_clone(this_relation, defer_relation) %}
  {{ create_table_as(False, this_relation, 'select * from ' ~ defer_relation.render()) }}
{% endmacro %}

{%- materialization clone, adapter='ducklake' -%}
  {%- set relations = {'relations': []} -%}
  {%- if not defer_relation -%}
    {{ log("No relation found in state manifest for " ~ model.unique_id, info=True) }}
    {{ return(relations) }}
  {%- endif -%}

  {%- set existing_relation = load_cached_relation(this) -%}
  {%- if existing_relation and not flags.FULL_REFRESH -%}
    {{ log("Relation " ~ existing_relation ~ " already exists", info=True) }}
    {{ return(relations) }}
  {%- endif -%}

  {%- set other_existing_relation = load_cached_relation(defer_relation) -%}
  {%- if other_existing_relation and other_existing_relation.type == 'table' and can_clone_table() -%}
    {%- set target_relation = this.incorporate(type='table') -%}
    {%- if target_relation.schema | lower == defer_relation.schema | lower
          and target_relation.identifier | lower == defer_relation.identifier | lower -%}
      {{ log("Target relation and defer relation are the same, skipping clone for relation: " ~ target_relation.render()) }}
      {{ return({'relations': [target_relation]}) }}
    {%- endif -%}
    {%- if existing_relation is not none and not existing_relation.is_table -%}
      {{ drop_relation_if_exists(existing_relation) }}
    {%- endif -%}
    {{ run_hooks(pre_hooks, inside_transaction=False) }}
    {{ run_hooks(pre_hooks, inside_transaction=True) }}
    {% call statement('main') %}
      {{ create_or_replace_clone(target_relation, defer_relation) }}
    {% endcall %}
    {{ ducklake_finish(target_relation, for_columns=false) }}
    {{ return({'relations': [target_relation]}) }}
  {%- else -%}
    {{ return(context['materialization_view_ducklake']()) }}
  {%- endif -%}
{%- endmaterialization -%}
