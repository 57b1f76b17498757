"""dbt-tests-adapter's dbt_clone suites. A ducklake clone of a table is a copy written in one snapshot (see
macros/materializations/clone.sql for why files are not shared); views clone as views."""

from __future__ import annotations

from dbt.tests.adapter.dbt_clone.test_dbt_clone import (
    BaseCloneNotPossible,
    BaseClonePossible,
    BaseCloneSameSourceAndTarget,
    BaseCloneSameTargetAndState,
)


class TestClonePossible(BaseClonePossible):
    pass


class TestCloneNotPossible(BaseCloneNotPossible):
    pass


class TestCloneSameSourceAndTarget(BaseCloneSameSourceAndTarget):
    pass


class TestCloneSameTargetAndState(BaseCloneSameTargetAndState):
    pass
