"""Monthly cohorts, in PySpark: customers grouped by the month of their first order, and what each cohort spent in
that month and the months after. A Python model runs in the adapter's SparkSession; what it returns becomes a
DuckLake table in one snapshot, like a SQL model's."""

from pyspark.sql import functions as F


def model(dbt, session):
    dbt.config(materialized="table")
    orders = dbt.ref("stg_orders").where(F.col("status") != "returned")  # a lake table as a DataFrame

    month = F.date_trunc("month", F.col("ordered_at")).cast("date")
    firsts = orders.groupBy("customer_id").agg(F.min(month).alias("cohort_month"))
    activity = (
        orders.withColumn("order_month", month)
        .join(firsts, "customer_id")
        .withColumn("months_since_first", F.months_between("order_month", "cohort_month").cast("int"))
    )
    return (
        activity.groupBy("cohort_month", "months_since_first")
        .agg(F.countDistinct("customer_id").alias("active_customers"), F.round(F.sum("amount"), 2).alias("revenue"))
        .orderBy("cohort_month", "months_since_first")
    )
