{#- Time travel: a DuckLake table (a ref or source) as of a snapshot version, a time, or N changes back.

      select * from {{ ducklake_at(ref('orders'), version=42) }}
      select * from {{ ducklake_at(source('shop', 'raw_orders'), timestamp='2026-11-20 08:00:00') }}
      select * from {{ ducklake_at(ref('orders'), changes_back=1) }}   -- the version before the last change

    A version that does not exist or was expired, a time before the lake, or a table that did not exist then, is an
    error naming it. changes_back beyond the table's first version gives none (see ducklake_previous_or_empty). -#}
{% macro ducklake_at(relation, version=none, timestamp=none, changes_back=none) -%}
  {%- if not execute -%}{{ return(relation) }}{%- endif -%}
  {%- set name = adapter.ducklake_at(relation, version, timestamp, changes_back) -%}
  {%- if name is none -%}
    {{ exceptions.raise_compiler_error(relation ~ " has no version " ~ changes_back ~ " changes back") }}
  {%- endif -%}
  {{ return(name) }}
{%- endmacro %}


{#- The table N changes back, or an empty relation with its current columns when it is younger than that (so a test
    comparing with the previous version passes on a first build). -#}
{% macro ducklake_previous_or_empty(relation, changes_back=1) -%}
  {%- if not execute -%}{{ return(relation) }}{%- endif -%}
  {%- set name = adapter.ducklake_at(relation, none, none, changes_back) -%}
  {%- if name is none -%}
    {{ return('(select * from ' ~ relation ~ ' where false)') }}
  {%- endif -%}
  {{ return(name) }}
{%- endmacro %}


{#- Generic tests comparing a model with its own history (time travel), for CI. -#}

{#- No row (by key column(s), or whole rows) that the previous version had is missing now. -#}
{% test ducklake_no_rows_lost(model, column_name=none, key=none, changes_back=1) %}
  {%- set keys = key if key is not none else column_name -%}
  {%- set cols = '*' if keys is none else ([keys] if keys is string else keys) | join(', ') -%}
  select {{ cols }} from {{ ducklake_previous_or_empty(model, changes_back) }}
  except
  select {{ cols }} from {{ model }}
{% endtest %}


{#- The row count moved by no more than the bounds since the previous version (absolute and/or relative). -#}
{% test ducklake_row_count_change(model, min_change=none, max_change=none, min_ratio=none, max_ratio=none,
                                  changes_back=1) %}
  with counts as (
    select (select count(*) from {{ model }}) as now_rows,
           (select count(*) from {{ ducklake_previous_or_empty(model, changes_back) }}) as before_rows
  )
  select now_rows, before_rows, now_rows - before_rows as change from counts
  where before_rows > 0 and (false
    {%- if min_change is not none %} or now_rows - before_rows < {{ min_change }}{% endif %}
    {%- if max_change is not none %} or now_rows - before_rows > {{ max_change }}{% endif %}
    {%- if min_ratio is not none %} or now_rows < before_rows * {{ min_ratio }}{% endif %}
    {%- if max_ratio is not none %} or now_rows > before_rows * {{ max_ratio }}{% endif %})
{% endtest %}


{#- Append-only models: every row of the previous version is still there, unchanged (duplicates counted). -#}
{% test ducklake_history_unchanged(model, changes_back=1) %}
  {%- set previous = ducklake_previous_or_empty(model, changes_back) -%}
  {#- the columns both versions have (a column added since is not history) -#}
  {%- set before = adapter.query_columns('select * from ' ~ previous) if execute else [] -%}
  {%- set cols = [] -%}
  {%- for c in adapter.get_columns_in_relation(model) if c.name in before -%}{%- do cols.append(c.quoted) -%}{%- endfor -%}
  {%- set cols = cols | join(', ') or '*' -%}
  select {{ cols }} from {{ previous }}
  except all
  select {{ cols }} from {{ model }}
{% endtest %}


{#- The model equals a given version (or the version at a time): rows in one and not the other, both ways. -#}
{% test ducklake_equal_to_version(model, version=none, timestamp=none) %}
  {%- set other = ducklake_at(model, version=version, timestamp=timestamp) -%}
  (select 'missing' as side, * from {{ other }} except all select 'missing' as side, * from {{ model }})
  union all
  (select 'extra' as side, * from {{ model }} except all select 'extra' as side, * from {{ other }})
{% endtest %}
