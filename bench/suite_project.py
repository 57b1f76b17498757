"""A realistic dbt project for the dbt loop: most of its tests are SQL over one or two relations, as real projects'.

`copies` copies of one small shop (five seeds, eight models, 22 tests), so that the project's size scales without
changing its mix. Per copy `k`:

- seeds: `raw_customers_k`, `raw_orders_k`, `raw_payments_k`, `raw_price_bands_k`, `raw_events_k` (20-60 rows);
- models: the views `stg_customers_k`, `stg_orders_k`, `stg_payments_k`, `events_daily_k`; the tables `orders_k`
  (orders with their payments), `customers_k` (per customer: orders, total, first order), `bands_k`; the incremental
  merge `customer_orders_k`;
- tests the catalog's statistics answer (8): `not_null`, `unique`, `accepted_values`, `relationships`;
- tests that need SQL (12): the package-style generic tests of `macros/tests.sql` (written in the project, as a macro
  package has them: `expression_is_true`, `equality`, `recency`, `at_least_one`, `mutually_exclusive_ranges`,
  `cardinality_equality`), some over views, some with a `where` config, one with `store_failures`; two singular
  tests (one a join of two relations);
- two dbt unit tests (fixture rows for a model's inputs, its output compared with the expected rows).

The SQL is what both Spark and DuckDB accept, so the same project runs on dbt-duckdb.
"""

from __future__ import annotations

from pathlib import Path

# the generic tests the catalog's statistics (or the driver's counts) answer; every other test needs SQL
STATS_TESTS = ("not_null", "unique", "accepted_values", "relationships")

MACROS = """\
{% test expression_is_true(model, expression, column_name=None) %}
select * from {{ model }} where not ({{ expression }})
{% endtest %}

{% test equality(model, compare_model, compare_columns) %}
{%- set cols = compare_columns | join(', ') %}
with a as (select {{ cols }} from {{ model }}),
b as (select {{ cols }} from {{ compare_model }}),
a_minus_b as (select * from a except select * from b),
b_minus_a as (select * from b except select * from a),
unioned as (
  select 'a_minus_b' as which_diff, a_minus_b.* from a_minus_b
  union all
  select 'b_minus_a' as which_diff, b_minus_a.* from b_minus_a
)
select * from unioned
{% endtest %}

{% test recency(model, field, days) %}
with recency as (select max({{ field }}) as most_recent from {{ model }})
select most_recent, current_timestamp - interval '{{ days }}' day as threshold
from recency
where most_recent < current_timestamp - interval '{{ days }}' day or most_recent is null
{% endtest %}

{% test at_least_one(model, column_name) %}
select * from (
  select count({{ column_name }}) as filler_column from {{ model }}
  having count({{ column_name }}) = 0
) validation_errors
{% endtest %}

{% test mutually_exclusive_ranges(model, lower_bound_column, upper_bound_column, partition_by) %}
with window_functions as (
  select
    {{ partition_by }} as partition_by_col,
    {{ lower_bound_column }} as lower_bound,
    {{ upper_bound_column }} as upper_bound,
    lead({{ lower_bound_column }}) over (
      partition by {{ partition_by }} order by {{ lower_bound_column }}, {{ upper_bound_column }}
    ) as next_lower_bound,
    row_number() over (
      partition by {{ partition_by }} order by {{ lower_bound_column }} desc, {{ upper_bound_column }} desc
    ) = 1 as is_last_record
  from {{ model }}
),
calc as (
  select *,
    coalesce(lower_bound < upper_bound, false) as lower_bound_less_than_upper_bound,
    coalesce(upper_bound <= next_lower_bound, is_last_record, false) as upper_bound_ok
  from window_functions
),
validation_errors as (
  select * from calc where not (lower_bound_less_than_upper_bound and upper_bound_ok)
)
select * from validation_errors
{% endtest %}

{% test cardinality_equality(model, column_name, to, field) %}
with table_a as (select {{ column_name }} as k, count(*) as num_rows from {{ model }} group by {{ column_name }}),
table_b as (select {{ field }} as k, count(*) as num_rows from {{ to }} group by {{ field }}),
except_a as (select * from table_a except select * from table_b),
except_b as (select * from table_b except select * from table_a),
unioned as (select * from except_a union all select * from except_b)
select * from unioned
{% endtest %}
"""

MODELS = {
    "stg_customers": ("view", "select id as customer_id, name, cast(signup_date as date) as signup_date, segment\n"
                              "from {{ ref('raw_customers_K') }}"),
    "stg_orders": ("view", "select id as order_id, customer_id, cast(order_date as date) as order_date, amount, status\n"
                           "from {{ ref('raw_orders_K') }}"),
    "stg_payments": ("view", "select id as payment_id, order_id, amount, method from {{ ref('raw_payments_K') }}"),
    "events_daily": ("view", "select cast(event_ts as date) as day, kind, count(*) as n\n"
                             "from {{ ref('raw_events_K') }} group by cast(event_ts as date), kind"),
    "orders": ("table", "select o.order_id, o.customer_id, o.order_date, o.amount, o.status,\n"
                        "  coalesce(p.paid, 0) as paid\n"
                        "from {{ ref('stg_orders_K') }} o\n"
                        "left join (select order_id, sum(amount) as paid from {{ ref('stg_payments_K') }}\n"
                        "           group by order_id) p on p.order_id = o.order_id"),
    "customers": ("table", "select c.customer_id, c.name, c.signup_date, count(o.order_id) as n_orders,\n"
                           "  coalesce(sum(o.amount), 0) as total_amount, min(o.order_date) as first_order_date\n"
                           "from {{ ref('stg_customers_K') }} c left join {{ ref('orders_K') }} o\n"
                           "  on o.customer_id = c.customer_id\n"
                           "group by c.customer_id, c.name, c.signup_date"),
    "bands": ("table", "select segment, band, lower_bound, upper_bound from {{ ref('raw_price_bands_K') }}"),
    "customer_orders": ("incremental", "select order_id, customer_id, amount, order_date from {{ ref('orders_K') }}"),
}

SINGULAR = {
    "overpaid": "select * from {{ ref('orders_K') }} where paid > amount * 10",
    "first_order_before_signup": "select c.customer_id from {{ ref('customers_K') }} c\n"
                                 "join {{ ref('stg_customers_K') }} s on s.customer_id = c.customer_id\n"
                                 "where c.first_order_date < s.signup_date",
}


def _seeds(k: int) -> dict[str, str]:
    customers = "".join(f"{i},name_{i}_{k},2023-{1 + i % 12:02d}-{1 + i % 27:02d},{'abc'[i % 3]}\n" for i in range(20))
    orders = "".join(f"{i},{i % 20},2024-{1 + i % 12:02d}-{1 + (i * 7) % 27:02d},{10 + (i * 13) % 90}.50,"
                     f"{['placed', 'shipped', 'returned'][i % 3]}\n" for i in range(60))
    payments = "".join(f"{i},{i % 60},{5 + (i * 11) % 40}.25,{['card', 'cash', 'gift'][i % 3]}\n" for i in range(50))
    bands = "".join(f"{s},{b},{b * 100},{(b + 1) * 100}\n" for s in "abc" for b in range(4))
    events = "".join(f"{i},{i % 20},2024-03-{1 + i % 20:02d} {i % 24:02d}:15:00,{['view', 'click'][i % 2]}\n"
                     for i in range(40))
    return {
        f"raw_customers_{k}": "id,name,signup_date,segment\n" + customers,
        f"raw_orders_{k}": "id,customer_id,order_date,amount,status\n" + orders,
        f"raw_payments_{k}": "id,order_id,amount,method\n" + payments,
        f"raw_price_bands_{k}": "segment,band,lower_bound,upper_bound\n" + bands,
        f"raw_events_{k}": "id,user_id,event_ts,kind\n" + events,
    }


def _schema(k: int) -> str:
    """The copy's tests, in schema.yml (8 the statistics answer, 10 generic SQL tests, two unit tests)."""
    return f"""\
  - name: stg_customers_{k}
    columns:
      - name: customer_id
        data_tests:
          - at_least_one
  - name: stg_orders_{k}
    data_tests:
      - recency:
          arguments: {{field: order_date, days: 36500}}
    columns:
      - name: status
        data_tests:
          - at_least_one:
              config: {{where: "amount > 20"}}
  - name: stg_payments_{k}
    data_tests:
      - expression_is_true:
          arguments: {{expression: "amount > 0"}}
          config: {{where: "method <> 'gift'"}}
  - name: orders_{k}
    data_tests:
      - expression_is_true:
          arguments: {{expression: "amount >= 0 and paid >= 0"}}
      - cardinality_equality:
          arguments: {{column_name: customer_id, to: "ref('stg_orders_{k}')", field: customer_id}}
    columns:
      - name: order_id
        data_tests: [not_null, unique]
      - name: status
        data_tests:
          - accepted_values:
              arguments: {{values: ['placed', 'shipped', 'returned']}}
      - name: customer_id
        data_tests:
          - relationships:
              arguments: {{to: "ref('customers_{k}')", field: customer_id}}
  - name: customers_{k}
    data_tests:
      - expression_is_true:
          arguments: {{expression: "total_amount >= 0"}}
          config: {{store_failures: true}}
    columns:
      - name: customer_id
        data_tests: [not_null, unique]
      - name: name
        data_tests: [at_least_one]
  - name: bands_{k}
    data_tests:
      - mutually_exclusive_ranges:
          arguments: {{lower_bound_column: lower_bound, upper_bound_column: upper_bound, partition_by: segment}}
  - name: customer_orders_{k}
    data_tests:
      - equality:
          arguments: {{compare_model: "ref('orders_{k}')", compare_columns: [order_id, customer_id, amount]}}
    columns:
      - name: order_id
        data_tests: [not_null, unique]
"""


def _unit_tests(k: int) -> str:
    return f"""\
  - name: orders_sum_payments_{k}
    model: orders_{k}
    given:
      - input: ref('stg_orders_{k}')
        rows:
          - {{order_id: 1, customer_id: 7, order_date: '2024-01-02', amount: 10.5, status: placed}}
          - {{order_id: 2, customer_id: 7, order_date: '2024-01-03', amount: 20.5, status: shipped}}
      - input: ref('stg_payments_{k}')
        rows:
          - {{payment_id: 1, order_id: 1, amount: 4.25, method: card}}
          - {{payment_id: 2, order_id: 1, amount: 6.25, method: cash}}
    expect:
      rows:
        - {{order_id: 1, paid: 10.5}}
        - {{order_id: 2, paid: 0}}
  - name: customers_counts_{k}
    model: customers_{k}
    given:
      - input: ref('stg_customers_{k}')
        rows:
          - {{customer_id: 1, name: ann, signup_date: '2023-01-01', segment: a}}
          - {{customer_id: 2, name: bob, signup_date: '2023-02-01', segment: b}}
      - input: ref('orders_{k}')
        rows:
          - {{order_id: 1, customer_id: 1, order_date: '2024-01-02', amount: 10.5}}
          - {{order_id: 2, customer_id: 1, order_date: '2024-01-05', amount: 1.5}}
    expect:
      rows:
        - {{customer_id: 1, n_orders: 2, first_order_date: '2024-01-02'}}
        - {{customer_id: 2, n_orders: 0, first_order_date: null}}
"""


def write_suite_project(root: Path, profile_output: str, copies: int) -> None:
    """The project (see the module) under root, with `profile_output` (YAML, the target's keys) as its profile."""
    for sub in ("seeds", "models", "macros", "tests"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "dbt_project.yml").write_text(
        'name: suite\nversion: "1.0"\nconfig-version: 2\nprofile: suite\n'
        'seed-paths: ["seeds"]\nmodel-paths: ["models"]\nmacro-paths: ["macros"]\ntest-paths: ["tests"]\n')
    body = "".join("      " + line + "\n" for line in profile_output.splitlines())
    (root / "profiles.yml").write_text(f"suite:\n  target: dev\n  outputs:\n    dev:\n{body}")
    (root / "macros" / "tests.sql").write_text(MACROS)
    schema = ["version: 2", "models:"]
    units = ["unit_tests:"]
    for k in range(copies):
        for name, text in _seeds(k).items():
            (root / "seeds" / f"{name}.csv").write_text(text)
        for name, (kind, sql) in MODELS.items():
            cfg = (f"{{{{ config(materialized='{kind}'"
                   + (", incremental_strategy='merge', unique_key='order_id'" if kind == "incremental" else "")
                   + ") }}\n")
            (root / "models" / f"{name}_{k}.sql").write_text(cfg + sql.replace("_K'", f"_{k}'") + "\n")
        for name, sql in SINGULAR.items():
            (root / "tests" / f"{name}_{k}.sql").write_text(sql.replace("_K'", f"_{k}'") + "\n")
        schema.append(_schema(k))
        units.append(_unit_tests(k))
    (root / "models" / "schema.yml").write_text("\n".join(schema + units) + "\n")


def test_class(uid: str) -> str:
    """`stats` (a generic test the catalog's statistics answer), `sql` (any other data test) or `unit`."""
    if uid.startswith("unit_test."):
        return "unit"
    name = uid.split(".")[2]
    return "stats" if name.startswith(STATS_TESTS) else "sql"
