{% snapshot customers_history %}
{#- every version of each customer, replayed from raw_customers' DuckLake change feed: valid from the commit time of
    the snapshot that made it (whoever wrote it: dbt seed, DuckDB) to the next one -#}
{{ config(strategy='ducklake', unique_key='id', hard_deletes='invalidate', target_schema='main') }}
select * from {{ ducklake_changes(source('shop', 'raw_customers')) }}
{% endsnapshot %}
