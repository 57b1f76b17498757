"""Spark errors as users see them: the class and message, not the plan (pure logic)."""

from dbt.adapters.ducklake.connections import short_spark_error

PLAN_ERROR = """[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `no_col` cannot be \
resolved. Did you mean one of the following? [`id`]. SQLSTATE: 42703; line 1 pos 7;
'Project ['no_col]
+- SubqueryAlias spark_catalog.main.m
   +- View (`spark_catalog`.`main`.`m`, [id#3])
      +- Project [cast(id#2 as int) AS id#3]"""


def test_the_plan_is_cut() -> None:
    short = short_spark_error(PLAN_ERROR)
    assert short.startswith("[UNRESOLVED_COLUMN.WITH_SUGGESTION]") and short.endswith("line 1 pos 7")
    assert "Project" not in short and "\n" not in short


def test_sql_context_and_jvm_traces_are_cut() -> None:
    text = "[PARSE_SYNTAX_ERROR] Syntax error at or near 'x'. SQLSTATE: 42601\n== SQL ==\nselect x\n---^^^\n" \
           "JVM stacktrace:\norg.apache.spark.sql.AnalysisException\n\tat org.apache.Foo.bar(Foo.scala:1)"
    assert short_spark_error(text) == "[PARSE_SYNTAX_ERROR] Syntax error at or near 'x'. SQLSTATE: 42601"


def test_a_duckdb_function_gets_the_spark_way() -> None:
    text = ("[UNRESOLVED_ROUTINE] Cannot resolve routine `strftime` on search path [`system`.`builtin`, "
            "`system`.`session`, `spark_catalog`.`default`]. SQLSTATE: 42883; line 1 pos 7")
    short = short_spark_error(text)
    assert short.startswith("[UNRESOLVED_ROUTINE]")
    assert short.endswith("Models run as Spark SQL (Spark's functions, not DuckDB's): for DuckDB's strftime(), use "
                          "date_format(ts, 'yyyy-MM-dd').")
    other = short_spark_error(text.replace("strftime", "my_udf"))
    assert other.endswith("Models run as Spark SQL (Spark's functions, not DuckDB's).")
    assert short_spark_error("[PARSE_SYNTAX_ERROR] Syntax error at or near 'x'.") == \
        "[PARSE_SYNTAX_ERROR] Syntax error at or near 'x'."
