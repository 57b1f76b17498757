{{ config(materialized='incremental', unique_key='id') }}
-- follows the raw_customers table through its DuckLake change feed: each run merges only the rows inserted, updated
-- or deleted since the previous run (by any writer, DuckDB included); the first run takes every row
select id, name, upper(country) as country, _ducklake_change_type
from {{ ducklake_changes(source('shop', 'raw_customers')) }}
