"""A PostgreSQL catalog's password never shows: not in dbt debug, errors, logs/dbt.log, target/ artifacts, Spark's
configuration or the snapshots' commit info; whether it is in the catalog URL, in the profile's `password`, or in
libpq's environment (PGPASSWORD). The server is real and, for the test's role, enforces scram-sha-256 over TCP."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt.adapters.ducklake.credentials import DuckLakeCredentials
from dbt.adapters.ducklake.runtime import SetupError, runtime_for
from tests.support import postgres

PASSWORD = "Lake$ecret/7@pg"  # characters a URL must encode
GOOD = "{{ config(materialized='table') }}\nselect 1 as id"
BAD = "{{ config(materialized='table') }}\nselect no_such_column from {{ ref('good') }}"


def _forms() -> list[str]:
    return [PASSWORD, quote(PASSWORD, safe=""), quote_plus(PASSWORD)]


def _assert_nowhere(texts: dict[str, str]) -> None:
    for where, text in texts.items():
        for form in _forms():
            assert form not in text, f"the password ({form!r}) shows in {where}"


def _files_under(*roots: str) -> dict[str, str]:
    out = {}
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                path = os.path.join(dirpath, f)
                try:
                    with open(path, errors="replace") as fh:
                        out[path] = fh.read()
                except OSError:
                    continue
    return out


@pytest.fixture(scope="session")
def lake_role(pg_server: postgres.PostgresServer) -> tuple[str, bool]:
    enforced = pg_server.add_password_user("lake_secret_user", PASSWORD)
    return "lake_secret_user", enforced


def _database(pg_server: postgres.PostgresServer, name: str) -> str:
    url = pg_server.create_database(name)
    return url.rsplit("/", 1)[1]


class _SecretChecks:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"good.sql": GOOD, "bad.sql": BAD}

    def test_password_never_shows(self, project: object, logs_dir: str) -> None:
        out_debug = run_dbt_and_capture(["debug"])[1]
        assert "catalog" in out_debug and "All checks passed" in out_debug
        results, out_run = run_dbt_and_capture(["run"], expect_pass=False)
        assert {r.node.name: r.status for r in results} == {"good": "success", "bad": "error"}
        adapter = project.adapter  # type: ignore[attr-defined]
        creds: DuckLakeCredentials = adapter.config.credentials
        rt = runtime_for(creds)
        conf = "\n".join(f"{k}={v}" for k, v in rt.spark.sparkContext.getConf().getAll())
        snaps = [str(s) for s in rt.lake.snapshots()]
        texts = {"dbt debug": out_debug, "dbt run": out_run, "Spark's configuration": conf,
                 "the snapshots": "\n".join(snaps), **_files_under(logs_dir, os.path.join(
                     project.project_root, "target"))}  # type: ignore[attr-defined]
        _assert_nowhere(texts)
        # a catalog that cannot be reached: the error names it, masked
        unreachable = DuckLakeCredentials(catalog=creds.catalog.replace(
            f":{creds.catalog_location().url.port}/", ":1/"), password=creds.password, data_path=creds.data_path,
            schema="main")
        with pytest.raises(SetupError) as err:
            runtime_for(unreachable)
        assert "the catalog 'postgresql://lake_secret_user" in str(err.value) and ":1/" in str(err.value)
        _assert_nowhere({"a connection error": str(err.value)})


class TestPasswordInTheUrl(_SecretChecks):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, pg_server: postgres.PostgresServer, lake_role: tuple[str, bool],
                           ducklake_root: str, unique_schema: str) -> dict[str, object]:
        db = _database(pg_server, f"{unique_schema}_url"[-60:])
        return {"type": "ducklake", "catalog": f"postgresql://{lake_role[0]}:{quote(PASSWORD, safe='')}@"
                f"{pg_server.host}:{pg_server.port}/{db}", "data_path": f"{ducklake_root}/{unique_schema}_data/",
                "master": "local[2]", "threads": 1}


class TestPasswordField(_SecretChecks):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, pg_server: postgres.PostgresServer, lake_role: tuple[str, bool],
                           ducklake_root: str, unique_schema: str) -> dict[str, object]:
        db = _database(pg_server, f"{unique_schema}_field"[-60:])
        return {"type": "ducklake", "catalog": f"postgresql://{lake_role[0]}@{pg_server.host}:{pg_server.port}/{db}",
                "password": PASSWORD, "data_path": f"{ducklake_root}/{unique_schema}_data/", "master": "local[2]",
                "threads": 1}


class TestLibpqEnvironment:
    """No password in the profile: PGPASSWORD (libpq's environment) logs in."""

    @pytest.fixture(scope="class", autouse=True)
    def pgpassword(self) -> Iterator[None]:
        os.environ["PGPASSWORD"] = PASSWORD
        yield
        os.environ.pop("PGPASSWORD", None)

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, pg_server: postgres.PostgresServer, lake_role: tuple[str, bool],
                           ducklake_root: str, unique_schema: str) -> dict[str, object]:
        db = _database(pg_server, f"{unique_schema}_env"[-60:])
        return {"type": "ducklake", "catalog": f"postgresql://{lake_role[0]}@{pg_server.host}:{pg_server.port}/{db}",
                "data_path": f"{ducklake_root}/{unique_schema}_data/", "master": "local[2]", "threads": 1}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"good.sql": GOOD}

    def test_pgpassword_logs_in(self, project: object, lake_role: tuple[str, bool], logs_dir: str,
                                tmp_path: Path) -> None:
        assert run_dbt(["run"])[0].status == "success"
        _assert_nowhere(_files_under(logs_dir))
        # libpq's password file works the same way (PGPASSFILE, or ~/.pgpass)
        creds = project.adapter.config.credentials  # type: ignore[attr-defined]
        loc = creds.catalog_location().url
        passfile = tmp_path / "pgpass"
        passfile.write_text(f"{loc.host}:{loc.port}:*:{lake_role[0]}:{PASSWORD}\n")
        passfile.chmod(0o600)
        os.environ.pop("PGPASSWORD")
        os.environ["PGPASSFILE"] = str(passfile)
        try:
            runtime_for(DuckLakeCredentials(catalog=creds.catalog + "?application_name=passfile",
                                            data_path=creds.data_path, schema="main"))
        finally:
            os.environ.pop("PGPASSFILE")
            os.environ["PGPASSWORD"] = PASSWORD
        if lake_role[1]:  # enforced: without the environment the role cannot log in
            os.environ.pop("PGPASSWORD")
            creds = project.adapter.config.credentials  # type: ignore[attr-defined]
            other = DuckLakeCredentials(catalog=creds.catalog + "?application_name=x", data_path=creds.data_path,
                                        schema="main")
            with pytest.raises(SetupError, match="password authentication failed|no password supplied"):
                runtime_for(other)
            os.environ["PGPASSWORD"] = PASSWORD


def test_missing_driver_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the postgres extra were not installed
    creds = DuckLakeCredentials(catalog=f"postgresql://u:{quote(PASSWORD, safe='')}@127.0.0.1:5/db",
                                data_path=str(tmp_path / "data"), schema="main")
    with pytest.raises(SetupError) as err:
        runtime_for(creds)
    assert "pip install 'dbt-ducklake[postgres]'" in str(err.value)
    _assert_nowhere({"the missing-driver error": str(err.value)})
