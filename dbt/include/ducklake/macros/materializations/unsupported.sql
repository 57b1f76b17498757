{#- What DuckLake has no place for: a clear error naming what to use instead, before anything is written. -#}
{% materialization materialized_view, adapter='ducklake' %}
  {{ exceptions.raise_compiler_error("dbt-ducklake: " ~ this ~ " is materialized='materialized_view', but DuckLake has "
      ~ "no materialized views. Use materialized='table' (rebuilt by each run, one snapshot), or 'incremental' "
      ~ "(only the changes; with ducklake_changes() it follows the upstream's change feed).") }}
{% endmaterialization %}

{% materialization function, adapter='ducklake', supported_languages=['sql', 'python', 'javascript'] %}
  {{ exceptions.raise_compiler_error("dbt-ducklake: cannot create the function " ~ this ~ ": DuckLake stores tables, "
      ~ "views and DuckDB macros, none of which Spark can call as a function. Put reusable SQL in a dbt macro "
      ~ "(macros/*.sql), which expands inside every model that calls it.") }}
{% endmaterialization %}
