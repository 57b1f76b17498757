select c.customer_id, c.name, c.country,
       count(o.order_id) as orders,
       coalesce(sum(case when o.status <> 'returned' then o.amount end), 0) as revenue,
       min(o.ordered_at) as first_order_at
from {{ ref('stg_customers') }} c
left join {{ ref('stg_orders') }} o on o.customer_id = c.customer_id
group by c.customer_id, c.name, c.country
