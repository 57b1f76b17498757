{#- The MERGE options of dbt-databricks (matched_condition, not_matched_condition, not_matched_by_source_action and
    _condition, skip_matched_step, skip_not_matched_step, target_alias, source_alias) and its replace_where strategy,
    under the names Delta users know. The incremental materialization checks them before anything is staged, so a bad
    configuration fails the first run as it fails later ones, and leaves the lake as it was. -#}

{#- incremental_predicates as a list: dbt's config is a list, dbt-databricks takes one string too (every strategy gets
    the list). -#}
{% macro ducklake_predicate_list(predicates) -%}
  {%- if predicates is none -%}{{ return([]) }}{%- endif -%}
  {%- set listed = [predicates] if predicates is string else predicates -%}
  {{ return(listed | map('string') | map('trim') | reject('equalto', '') | list) }}
{%- endmacro %}


{#- The model's MERGE options, read from its config and checked: a dict the merge strategy renders. -#}
{% macro ducklake_merge_options() -%}
  {%- set action = (config.get('not_matched_by_source_action') or '') | string | trim -%}
  {%- set words = action.lower().split() -%}
  {%- if action and not (words == ['delete'] or (words[:2] == ['update', 'set'] and words | length > 2)) -%}
    {%- do exceptions.raise_compiler_error(
          "not_matched_by_source_action must be 'delete' or 'update set <column> = <value>, ...', got '"
          ~ action ~ "'") -%}
  {%- endif -%}
  {%- set by_source_condition = config.get('not_matched_by_source_condition') -%}
  {%- if by_source_condition and not action -%}
    {%- do exceptions.raise_compiler_error(
          "not_matched_by_source_condition is set but not_matched_by_source_action is not: set it to 'delete' or "
          ~ "'update set ...' (the condition says which target rows missing from the model's rows it acts on)") -%}
  {%- endif -%}
  {%- set options = {
      'target_alias': config.get('target_alias') or 'DBT_INTERNAL_DEST',
      'source_alias': config.get('source_alias') or 'DBT_INTERNAL_SOURCE',
      'matched_condition': config.get('matched_condition'),
      'not_matched_condition': config.get('not_matched_condition'),
      'by_source_action': ('delete' if words == ['delete'] else action),
      'by_source_condition': by_source_condition,
      'skip_matched': (config.get('skip_matched_step') | string | lower) == 'true',
      'skip_not_matched': (config.get('skip_not_matched_step') | string | lower) == 'true',
  } -%}
  {%- if options.skip_matched and options.skip_not_matched and not action -%}
    {%- do exceptions.raise_compiler_error(
          "skip_matched_step and skip_not_matched_step are both true and there is no not_matched_by_source_action: "
          ~ "the MERGE would do nothing") -%}
  {%- endif -%}
  {{ return(options) }}
{%- endmacro %}


{#- Checks of a strategy's configuration that need no table: run before the model's first statement. -#}
{% macro ducklake_check_incremental_config(strategy, incremental_predicates) -%}
  {%- if strategy == 'merge' -%}
    {%- set options = ducklake_merge_options() -%}
    {%- if options.by_source_action and not config.get('unique_key') -%}
      {%- do exceptions.raise_compiler_error(
            "not_matched_by_source_action needs a unique_key: without one the merge strategy appends, and every "
            ~ "target row would be 'not matched by source'") -%}
    {%- endif -%}
  {%- elif config.get('not_matched_by_source_action') -%}
    {%- do exceptions.raise_compiler_error(
          "not_matched_by_source_action is an option of the merge strategy, not of '" ~ strategy ~ "'") -%}
  {%- elif strategy == 'replace_where' and not ducklake_predicate_list(incremental_predicates) -%}
    {%- do exceptions.raise_compiler_error(
          "incremental_strategy 'replace_where' needs incremental_predicates: the condition of the target rows the "
          ~ "model's rows replace, e.g. incremental_predicates=[\"day >= '2026-01-01'\"]") -%}
  {%- endif -%}
{%- endmacro %}


{% macro get_incremental_replace_where_sql(arg_dict) -%}
  {{ return(adapter.dispatch('get_incremental_replace_where_sql', 'dbt')(arg_dict)) }}
{%- endmacro %}


{#- replace_where (Delta's INSERT ... REPLACE WHERE): DELETE the target rows matching incremental_predicates, INSERT the
    model's rows, in the model's one snapshot. A model row the predicates do not match is refused (Delta's check), so
    the next run with the same predicates replaces every row this one wrote: Spark's assert_true fails the INSERT, and
    the staged DELETE is abandoned with it. The model's rows are checked under the target's alias, so predicates
    written unqualified or as DBT_INTERNAL_DEST.<column> (dbt's incremental_predicates) read the same on both. -#}
{% macro ducklake__get_incremental_replace_where_sql(arg_dict) -%}
  {%- set target = arg_dict['target_relation'] -%}
  {%- set where = '(' ~ ducklake_predicate_list(arg_dict['incremental_predicates']) | join(') and (') ~ ')' -%}
  {%- set cols = arg_dict['dest_columns'] | map(attribute='quoted') | join(', ') -%}
  {%- set change_type = adapter.change_type_column() -%}
  {%- set refused = "replace_where into " ~ target ~ ": a row of the model does not match incremental_predicates "
                    ~ where ~ "; every row the model writes must be one they replace (nothing was changed)" -%}
  {%- set check = 'coalesce(' ~ where ~ ', false)' -%}
  {%- if arg_dict['has_change_type'] -%}
    {%- set check = "DBT_INTERNAL_DEST." ~ change_type ~ " = 'delete' or " ~ check -%}
  {%- endif -%}
  delete from {{ target }} as DBT_INTERNAL_DEST where {{ where }};
  insert into {{ target }} ({{ cols }})
  select {{ cols }} from {{ arg_dict['temp_relation'] }} as DBT_INTERNAL_DEST
  where assert_true({{ check }}, '{{ refused | replace("\\", "\\\\") | replace("'", "\\'") }}') is null
  {%- if arg_dict['has_change_type'] %} and {{ change_type }} <> 'delete'{% endif %}
{%- endmacro %}
