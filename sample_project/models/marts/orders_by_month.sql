{{ config(partition_by=['month(ordered_at)']) }}
select order_id, customer_id, ordered_at, status, amount from {{ ref('stg_orders') }}
