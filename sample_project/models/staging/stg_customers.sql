select id as customer_id, name, upper(country) as country
from {{ source('shop', 'raw_customers') }}
