{#- dbt clone. A DuckLake clone of a table is a new table of the same lake, committed in one snapshot, whose catalog
    rows are built from the deferred table's at the current snapshot (column ids, partitioning, comments and tags, row
    ids, statistics) and whose data files are HARD LINKS of the deferred table's files in the clone's own directory:
    metadata only, no data is copied. Why not share the source's file paths: DuckDB's ducklake_cleanup_old_files
    deletes every path that ducklake_files_scheduled_for_deletion lists, and rebuilding the source schedules its
    files; deleting the source's name of a hard-linked file leaves the clone's name readable. (A view pinned to the
    source's snapshot would break once ducklake_expire_snapshots removes that snapshot.) Where hard links are
    impossible (another file system, a file system or policy that refuses them) the files' bytes are copied; where
    the lake layer cannot reach the files (remote storage) Spark copies the rows. The kind used is logged.
    A relation that is not a table (a view) is cloned as a view. -#}
{% macro ducklake__can_clone_table() %}
  {{ return(True) }}
{% endmacro %}

{% macro ducklake__create_or_replace_clone(this_relation, defer_relation) %}
  create or replace table {{ this_relation.render() }} clone {{ defer_relation.render() }}
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
