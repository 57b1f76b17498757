{#- ducklake_changes(relation, unique_key=none): in an incremental model, the rows of an upstream DuckLake table (a
    ref or a source) that changed since this model last consumed it, with their change type in the column
    _ducklake_change_type (insert | update_postimage | delete; a deleted row comes with its last values). On the
    first run or a full refresh: every current row, as an insert. Several changes of one row are netted to the last
    one, per unique_key (default: the model's unique_key when the upstream has those columns; else per row id).

    The strategies use the change type: merge and delete+insert delete the model's rows whose key was deleted
    upstream, append skips deletes; the column itself is never stored. The snapshot consumed from each upstream is
    committed with the model's rows (a table tag), so a failed run re-reads the same changes and a successful one
    never reads them twice.

      {{ config(materialized='incremental', unique_key='id') }}
      select id, amount * 2 as amount2, _ducklake_change_type from {{ ducklake_changes(ref('orders')) }}
-#}
{% macro ducklake_changes(relation, unique_key=none) -%}
  {%- if not execute -%}
    {{- return(relation) -}}
  {%- endif -%}
  {%- if model.resource_type == 'snapshot' and config.get('strategy') == 'ducklake' -%}
    {#- a snapshot replaying the change feed: every change, with its snapshot and commit time -#}
    {%- set exists = adapter.get_relation(none, this.schema, this.identifier) is not none -%}
    {{- return('(' ~ adapter.ducklake_replay_sql(relation, this, exists) ~ ')') -}}
  {%- endif -%}
  {%- set key = unique_key if unique_key is not none else config.get('unique_key') -%}
  {{- return('(' ~ adapter.ducklake_changes_sql(relation, this, is_incremental(), key) ~ ')') -}}
{%- endmacro %}
