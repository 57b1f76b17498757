"""The Spark layer: DuckLake tables in Spark SQL, and Spark writes as DuckLake commits. Knows nothing of dbt."""
