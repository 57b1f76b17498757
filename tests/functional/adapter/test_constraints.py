"""dbt-tests-adapter's constraints suite (model contracts) on this adapter.

Spark SQL has no TEXT type and its literals differ from Postgres's (no `::json`, `ARRAY[...]`), so the type lists and
the schema files use Spark types; the rollback checks expect Spark's NOT NULL message; the DDL checks expect the DDL
this adapter renders (one `create or replace table <name> (<columns and constraints>) as select ...`; check
constraints are not supported, so they are not in it); the sql_header models use Spark's `SET TIME ZONE` and
`current_timezone()` (the session time zone is restored after them)."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.constraints import fixtures
from dbt.tests.adapter.constraints.test_constraints import (
    BaseConstraintQuotedColumn,
    BaseConstraintsRollback,
    BaseConstraintsRuntimeDdlEnforcement,
    BaseIncrementalConstraintsColumnsEqual,
    BaseIncrementalConstraintsRollback,
    BaseIncrementalConstraintsRuntimeDdlEnforcement,
    BaseIncrementalContractSqlHeader,
    BaseIncrementalForeignKeyConstraint,
    BaseModelConstraintsRuntimeEnforcement,
    BaseTableConstraintsColumnsEqual,
    BaseTableContractSqlHeader,
    BaseViewConstraintsColumnsEqual,
)


def _spark_types(yml: str) -> str:
    return yml.replace("data_type: text", "data_type: string")


def _spark_header(sql: str) -> str:
    return (sql.replace("set session time zone 'Asia/Kolkata';", "set time zone 'Asia/Kolkata';")
            .replace("current_setting('timezone')", "current_timezone()"))


class SparkTypes:
    # the contract error prints Spark's type names in lower case (`| col | int | string | data type mismatch |`) and
    # the base test looks for each label as given or upper-cased, so the labels are lower case
    @pytest.fixture
    def string_type(self):
        return "string"

    @pytest.fixture
    def int_type(self):
        return "int"

    @pytest.fixture
    def data_types(self, int_type, string_type):
        # sql_column_value, schema_data_type, error_data_type
        return [
            ["1", int_type, int_type],
            ["'1'", string_type, string_type],
            ["true", "boolean", "boolean"],
            ["cast('2019-01-01' as date)", "date", "date"],
            ["cast('2019-01-01 00:00:00' as timestamp)", "timestamp", "timestamp"],
            ["array('a', 'b', 'c')", "array<string>", "array<string>"],
            ["array(1, 2, 3)", "array<int>", "array<int>"],
            ["cast(6.45 as decimal(10, 2))", "decimal(10,2)", "decimal(10,2)"],
        ]


class TestTableConstraintsColumnsEqual(SparkTypes, BaseTableConstraintsColumnsEqual):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_wrong_order.sql": fixtures.my_model_wrong_order_sql,
            "my_model_wrong_name.sql": fixtures.my_model_wrong_name_sql,
            "constraints_schema.yml": _spark_types(fixtures.model_schema_yml),
        }


class TestViewConstraintsColumnsEqual(SparkTypes, BaseViewConstraintsColumnsEqual):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_wrong_order.sql": fixtures.my_model_view_wrong_order_sql,
            "my_model_wrong_name.sql": fixtures.my_model_view_wrong_name_sql,
            "constraints_schema.yml": _spark_types(fixtures.model_schema_yml),
        }


class TestIncrementalConstraintsColumnsEqual(SparkTypes, BaseIncrementalConstraintsColumnsEqual):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_wrong_order.sql": fixtures.my_model_incremental_wrong_order_sql,
            "my_model_wrong_name.sql": fixtures.my_model_incremental_wrong_name_sql,
            "constraints_schema.yml": _spark_types(fixtures.model_schema_yml),
        }


# the DDL this adapter renders for the contracted model: the column list carries the constraints dbt renders for it
# (not null, and the unenforced primary key / foreign key / unique; check is not supported, so not rendered)
_EXPECTED_DDL = """
create or replace table <model_identifier> (
    id integer not null primary key references <foreign_key_model_identifier> (id) unique,
    color string,
    date_day string
)
as
select
  id,
  color,
  date_day
from
(
    -- depends_on: <foreign_key_model_identifier>
    select
    'blue' as color,
    1 as id,
    '2019-01-01' as date_day ) as model_subq
"""


class TestTableConstraintsRuntimeDdlEnforcement(BaseConstraintsRuntimeDdlEnforcement):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_model_wrong_order_depends_on_fk_sql,
            "foreign_key_model.sql": fixtures.foreign_key_model_sql,
            "constraints_schema.yml": _spark_types(fixtures.model_fk_constraint_schema_yml),
        }

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return _EXPECTED_DDL


class TestIncrementalConstraintsRuntimeDdlEnforcement(BaseIncrementalConstraintsRuntimeDdlEnforcement):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_model_incremental_wrong_order_depends_on_fk_sql,
            "foreign_key_model.sql": fixtures.foreign_key_model_sql,
            "constraints_schema.yml": _spark_types(fixtures.model_fk_constraint_schema_yml),
        }

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return _EXPECTED_DDL


class TestModelConstraintsRuntimeEnforcement(BaseModelConstraintsRuntimeEnforcement):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_model_wrong_order_depends_on_fk_sql,
            "foreign_key_model.sql": fixtures.foreign_key_model_sql,
            "constraints_schema.yml": _spark_types(fixtures.constrained_model_schema_yml),
        }

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return """
create or replace table <model_identifier> (
    id integer not null,
    color string,
    date_day string,
    primary key (id),
    constraint strange_uniqueness_requirement unique (color, date_day),
    foreign key (id) references <foreign_key_model_identifier> (id)
)
as
select
  id,
  color,
  date_day
from
(
    -- depends_on: <foreign_key_model_identifier>
    select
    'blue' as color,
    1 as id,
    '2019-01-01' as date_day ) as model_subq
"""


class TestTableConstraintsRollback(BaseConstraintsRollback):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_model_sql,
            "constraints_schema.yml": _spark_types(fixtures.model_schema_yml),
        }

    @pytest.fixture(scope="class")
    def expected_error_messages(self):
        return ["NOT NULL"]


class TestIncrementalConstraintsRollback(BaseIncrementalConstraintsRollback):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_incremental_model_sql,
            "constraints_schema.yml": _spark_types(fixtures.model_schema_yml),
        }

    @pytest.fixture(scope="class")
    def expected_error_messages(self):
        return ["NOT NULL"]


class RestoreTimeZone:
    """The header sets the time zone of the process's shared Spark session: put it back for the tests after these."""

    @pytest.fixture(scope="class", autouse=True)
    def _restore_time_zone(self, project):
        tz = project.run_sql("select current_timezone()", fetch="one")[0]
        yield
        project.run_sql(f"set time zone '{tz}'")


class TestTableContractSqlHeader(RestoreTimeZone, BaseTableContractSqlHeader):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_contract_sql_header.sql": _spark_header(fixtures.my_model_contract_sql_header_sql),
            "constraints_schema.yml": _spark_types(fixtures.model_contract_header_schema_yml),
        }


class TestIncrementalContractSqlHeader(RestoreTimeZone, BaseIncrementalContractSqlHeader):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_contract_sql_header.sql": _spark_header(fixtures.my_model_incremental_contract_sql_header_sql),
            "constraints_schema.yml": _spark_types(fixtures.model_contract_header_schema_yml),
        }


class TestIncrementalForeignKeyConstraint(BaseIncrementalForeignKeyConstraint):
    pass



class TestConstraintQuotedColumn(BaseConstraintQuotedColumn):
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"my_model.sql": fixtures.my_model_with_quoted_column_name_sql,
                "constraints_schema.yml": _spark_types(fixtures.model_quoted_column_schema_yml)}

    @pytest.fixture(scope="class")
    def expected_sql(self) -> str:
        return """
create or replace table <model_identifier> (id integer not null, `from` string not null, date_day string)
as select id, `from`, date_day from (select 'blue' as `from`, 1 as id, '2019-01-01' as date_day) as model_subq
"""
