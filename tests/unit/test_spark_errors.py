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
