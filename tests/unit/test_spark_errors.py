"""Spark errors as users see them: the class and message, not the plan (pure logic)."""

from dbt.adapters.ducklake.connections import short_jvm_error, short_spark_error

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


PY4J_ERROR = """An error occurred while calling o107.getResult.
: org.apache.spark.SparkException: Exception thrown in awaitResult: \x20
\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:56)
\tat org.apache.spark.security.SocketAuthServer.getResult(SocketAuthServer.scala:98)
Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file x. SQLSTATE: KD001
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(QueryExecutionErrors.scala:856)
\t... 21 more
Caused by: java.lang.RuntimeException: x is not a Parquet file. Expected magic number at tail, but found [-82, 13, 8, 0]
\tat org.apache.parquet.hadoop.ParquetFileReader.readFooter(ParquetFileReader.java:602)"""


def test_py4j_errors_lose_their_jvm_frames() -> None:
    short = short_jvm_error(PY4J_ERROR)
    assert short.splitlines() == [
        "An error occurred while calling o107.getResult.",
        ": org.apache.spark.SparkException: Exception thrown in awaitResult:",
        "Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file x. "
        "SQLSTATE: KD001",
        "Caused by: java.lang.RuntimeException: x is not a Parquet file. Expected magic number at tail, but found "
        "[-82, 13, 8, 0]"]
    assert short_jvm_error("a catalog error\nover two lines") == "a catalog error\nover two lines"  # no frames


PARSE_ERROR = """[PARSE_SYNTAX_ERROR] Syntax error at or near 'y'. SQLSTATE: 42601 (line 3, pos 12)

== SQL ==
select 1 as a,
  2 as b
from x wher y = 1
------------^^^
"""
STATEMENT = ('/* {"app": "dbt", "node_id": "model.p.bad"} */\n\n  \n    \n    create or replace table main.bad\n'
             '    \n    \n    \n    as\n    \nselect 1 as a,\n  2 as b\nfrom x wher y = 1\n  ')


def test_a_parse_error_names_the_line_of_the_statement_dbt_wrote_to_target_run() -> None:
    from dbt.adapters.ducklake.connections import statement_line

    out = statement_line(PARSE_ERROR, STATEMENT)
    assert out.splitlines()[0].endswith("(line 12, pos 12)")
    run_file = STATEMENT.split("*/\n", 1)[1]  # what dbt writes to target/run: the statement without its comment
    assert run_file.splitlines()[11] == "from x wher y = 1"
    # a statement without dbt's comment, or whose parsed text is not in it, keeps Spark's numbers
    assert statement_line(PARSE_ERROR, "select 1 as a,\n  2 as b\nfrom x wher y = 1") == PARSE_ERROR
    assert statement_line(PARSE_ERROR, "something else") == PARSE_ERROR


S3_WRITE_ERROR = """An error occurred while calling o150.parquet.
: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to s3a://b/lake/t. SQLSTATE: 58030
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError(QueryExecutionErrors.scala:774)
\tSuppressed: org.apache.spark.util.Utils$OriginalTryStackTraceException: Full stacktrace of original caller
\t\tat org.apache.spark.util.Utils$.doTryWithCallerStacktrace(Utils.scala:1400)
Caused by: org.apache.hadoop.fs.s3a.AWSStatus500Exception: Writing Object on lake/t/part-1.parquet: InternalError
\tat org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:260)
\tSuppressed: software.amazon.awssdk.core.exception.SdkClientException: Request attempt 1 failure: InternalError
\t\t... 12 more"""


def test_suppressed_exceptions_are_cut() -> None:
    assert short_jvm_error(S3_WRITE_ERROR).splitlines() == [
        "An error occurred while calling o150.parquet.",
        ": org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to s3a://b/lake/t. "
        "SQLSTATE: 58030",
        "Caused by: org.apache.hadoop.fs.s3a.AWSStatus500Exception: Writing Object on lake/t/part-1.parquet: "
        "InternalError"]
