{{ config(materialized='incremental') }}
-- appends only orders newer than what the table holds
select order_id, customer_id, ordered_at, amount from {{ ref('stg_orders') }}
{% if is_incremental() %}
where ordered_at > (select max(ordered_at) from {{ this }})
{% endif %}
