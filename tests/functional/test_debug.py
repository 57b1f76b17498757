"""`dbt debug` checks Spark, the catalog and the data path, and says which one is wrong and why; a bad profile is
refused naming the key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dbt.adapters.factory import reset_adapters
from dbt.tests.util import run_dbt_and_capture


@pytest.fixture(autouse=True)
def _forget_debug_adapter(request: pytest.FixtureRequest) -> Iterator[None]:
    """`dbt debug` outside dbt's `project` fixture registers the adapter with a bare profile; dbt's `adapter` fixture
    of the next test class in this process would get that one back (registration keeps the first) and fail without
    a project name."""
    yield
    if "project" not in request.fixturenames:
        reset_adapters()


class TestDebugOk:
    def test_debug_passes(self, project: object) -> None:
        _, out = run_dbt_and_capture(["debug"])
        assert "OK connection ok" in out and "All checks passed!" in out
        # no `author: None`: who the snapshots name when the profile names nobody
        assert "author: None" not in out and "(the operating system user; set author: to name another)" in out


class TestUnreachableCatalog:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str) -> dict[str, object]:
        return {"type": "ducklake", "catalog": "postgresql://nobody@127.0.0.1:1/nolake",
                "data_path": f"{ducklake_root}/unreachable/", "master": "local[2]", "threads": 1}

    @pytest.fixture(scope="class")
    def project_setup(self) -> None:  # type: ignore[override]
        return None  # the catalog cannot be reached: no schema to create

    def test_debug_names_the_catalog(self, project_root: object, profiles_root: object, dbt_project_yml: object,
                                     profiles_yml: object) -> None:
        _, out = run_dbt_and_capture(["debug", "--project-dir", str(project_root), "--profiles-dir",
                                      str(profiles_root)], expect_pass=False)
        assert "the catalog 'postgresql://nobody@127.0.0.1:1/nolake' does not work" in out
        assert "Connection refused" in out


class TestUnwritableDataPath:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str) -> dict[str, object]:
        return {"type": "ducklake", "catalog": f"{ducklake_root}/other.ducklake", "data_path": "/proc/nope/data/",
                "master": "local[2]", "threads": 1}

    @pytest.fixture(scope="class")
    def project_setup(self) -> None:  # type: ignore[override]
        return None

    def test_debug_names_the_data_path(self, project_root: object, profiles_root: object, dbt_project_yml: object,
                                       profiles_yml: object) -> None:
        _, out = run_dbt_and_capture(["debug", "--project-dir", str(project_root), "--profiles-dir",
                                      str(profiles_root)], expect_pass=False)
        assert "the data path '/proc/nope/data/' does not work" in out


class TestBadProfile:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str) -> dict[str, object]:
        return {"type": "ducklake", "catalog": f"{ducklake_root}/c.ducklake", "data_path": f"{ducklake_root}/d/",
                "master": "yarn", "threads": 1}

    def test_debug_names_the_key(self, project_root: object, profiles_root: object, dbt_project_yml: object,
                                 profiles_yml: object) -> None:
        _, out = run_dbt_and_capture(["debug", "--project-dir", str(project_root), "--profiles-dir",
                                      str(profiles_root)], expect_pass=False)
        assert "`master` 'yarn' is not a Spark master" in out
