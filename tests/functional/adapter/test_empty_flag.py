"""dbt-tests-adapter's empty suite (the --empty flag) on this adapter."""

from __future__ import annotations

from dbt.tests.adapter.empty.test_empty import BaseTestEmpty, BaseTestEmptyInlineSourceRef, MetadataWithEmptyFlag


class TestEmptyFlag(BaseTestEmpty):
    pass


class TestEmptyInlineSourceRef(BaseTestEmptyInlineSourceRef):
    pass


class TestMetadataWithEmptyFlag(MetadataWithEmptyFlag):
    pass
