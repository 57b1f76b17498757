"""dbt-tests-adapter's simple_seed suite on this adapter.

Skipped, with the reason at each skip: the full-refresh checks that expect views on the seed to be dropped with it
(Postgres's DROP ... CASCADE; DuckLake views have no dependencies), and the seed named `seed.with.dots` (Spark SQL
cannot name a table with dots)."""

from __future__ import annotations

from codecs import BOM_UTF8
from pathlib import Path

import pytest
from dbt.tests.adapter.simple_seed import fixtures, seeds
from dbt.tests.adapter.simple_seed.test_seed import (
    BaseBasicSeedTests,
    BaseSeedConfigFullRefreshOff,
    BaseSeedConfigFullRefreshOn,
    BaseSeedCustomSchema,
    BaseSeedParsing,
    BaseSeedSpecificFormats,
    BaseSeedWithEmptyDelimiter,
    BaseSeedWithUniqueDelimiter,
    BaseSeedWithWrongDelimiter,
    BaseSimpleSeedEnabledViaConfig,
    BaseSimpleSeedWithBOM,
    BaseTestEmptySeed,
)
from dbt.tests.adapter.simple_seed.test_seed_type_override import BaseSimpleSeedColumnOverride


class TestSeedConfigFullRefreshOff(BaseSeedConfigFullRefreshOff):
    pass


class TestSeedCustomSchema(BaseSeedCustomSchema):
    pass


class TestSeedWithUniqueDelimiter(BaseSeedWithUniqueDelimiter):
    pass


class TestSeedWithEmptyDelimiter(BaseSeedWithEmptyDelimiter):
    pass


class TestSimpleSeedEnabledViaConfig(BaseSimpleSeedEnabledViaConfig):
    pass


class TestSeedParsing(BaseSeedParsing):
    pass


class TestSimpleSeedWithBOM(BaseSimpleSeedWithBOM):
    """The base class copies seed_bom.csv from the adapter's test folder (dbt-postgres ships one); here the file is
    written from the suite's own CSV with a UTF-8 byte order mark in front."""

    @pytest.fixture(scope="class", autouse=True)
    def setUp(self, project):
        project.run_sql(seeds.seeds__expected_sql)
        path = Path(project.project_root) / "seeds" / "seed_bom.csv"
        path.write_text(BOM_UTF8.decode("utf-8") + seeds.seed__actual_csv.lstrip(), encoding="utf-8")


class TestEmptySeed(BaseTestEmptySeed):
    pass


# Spark type names for the Postgres ones in the suite (seeds infer bigint for integers, timestamp_ntz for zone-less
# date-times, as Postgres's timestamp without time zone)
_SPARK_TYPES = {"text": "string", "integer": "bigint", "timestamp without time zone": "timestamp_ntz"}


class TestSimpleSeedColumnOverride(BaseSimpleSeedColumnOverride):
    @pytest.fixture(scope="class")
    def models(self):
        yml = fixtures.properties__schema_yml
        for pg, spark in _SPARK_TYPES.items():
            yml = yml.replace(f"type: {pg}\n", f"type: {spark}\n")
        return {"schema.yml": yml}

    @staticmethod
    def seed_enabled_types():
        return {"seed_id": "string", "birthday": "date"}

    @staticmethod
    def seed_tricky_types():
        return {"seed_id_str": "string", "looks_like_a_bool": "string", "looks_like_a_date": "string"}


# DuckLake has no view dependencies: DuckDB's ducklake extension drops or replaces a table and leaves the views that read
# it alone, and so does this adapter (a full-refresh seed is replaced in one snapshot; its views keep working). The
# Postgres expectation that a full refresh drops the downstream view (DROP ... CASCADE) does not apply to a lake.
NO_CASCADE = "DuckLake views have no dependencies: replacing a seed keeps the views on it (no DROP ... CASCADE)"


class TestBasicSeedTests(BaseBasicSeedTests):
    @pytest.mark.skip(reason=NO_CASCADE)
    def test_simple_seed_full_refresh_flag(self, project):  # type: ignore[no-untyped-def]
        pass


class TestSeedConfigFullRefreshOn(BaseSeedConfigFullRefreshOn):
    @pytest.mark.skip(reason=NO_CASCADE)
    def test_simple_seed_full_refresh_config(self, project):  # type: ignore[no-untyped-def]
        pass


class TestSeedWithWrongDelimiter(BaseSeedWithWrongDelimiter):
    pass


class TestSeedSpecificFormats(BaseSeedSpecificFormats):
    # Spark SQL names have at most two parts and no dots in them: `seed.with.dots` cannot be a Spark view
    @pytest.mark.skip(reason="Spark SQL cannot name a table with dots (`seed.with.dots`)")
    def test_simple_seed(self, project):  # type: ignore[no-untyped-def]
        pass
