"""dbt-tests-adapter's simple_seed suite on this adapter.

Not here (they fail, see the suite report): BaseBasicSeedTests and BaseSeedConfigFullRefreshOn (a full refresh must
drop the views built on the seed, Postgres's DROP ... CASCADE), BaseSeedWithWrongDelimiter (seed columns are always
quoted, so a header with `|` loads instead of failing), BaseSeedSpecificFormats (a seed named `seed.with.dots`)."""

from __future__ import annotations

from codecs import BOM_UTF8
from pathlib import Path

import pytest
from dbt.tests.adapter.simple_seed import fixtures, seeds
from dbt.tests.adapter.simple_seed.test_seed import (
    BaseSeedConfigFullRefreshOff,
    BaseSeedCustomSchema,
    BaseSeedParsing,
    BaseSeedWithEmptyDelimiter,
    BaseSeedWithUniqueDelimiter,
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


# Spark type names for the Postgres ones in the suite (seeds infer bigint for integers, timestamp for datetimes)
_SPARK_TYPES = {"text": "string", "integer": "bigint", "timestamp without time zone": "timestamp"}


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
