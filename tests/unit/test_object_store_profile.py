"""The S3 keys of the profile: validation, masking, and the Spark settings they become (secrets kept out of
SparkConf)."""

from __future__ import annotations

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.ducklake.credentials import DuckLakeCredentials
from dbt.adapters.ducklake.spark.env import profile_session, s3a

SECRET = "wJalr/XUtnFEMI+K7MDENG"
TOKEN = "FwoGZXIvYXdzE+token/=="


def _creds(**kw: object) -> DuckLakeCredentials:
    base: dict[str, object] = {"catalog": "/tmp/x.ducklake", "data_path": "s3://bucket/lake/", "master": "local[1]",
                               "s3_access_key_id": "AKIAEXAMPLE", "s3_secret_access_key": SECRET,
                               "s3_session_token": TOKEN, "s3_region": "eu-west-1", "s3_endpoint": "127.0.0.1:9000",
                               "s3_url_style": "path", "s3_use_ssl": False}
    base.update(kw)
    return DuckLakeCredentials(**base)  # type: ignore[arg-type]


def test_secrets_are_masked() -> None:
    creds = _creds()
    assert SECRET in creds.secrets() and TOKEN in creds.secrets()
    assert creds.redact(f"failed with key {SECRET} and {TOKEN}") == "failed with key **** and ****"
    shown = dict(creds.connection_info())
    assert shown["s3_access_key_id"] == "AKIAEXAMPLE" and shown["s3_endpoint"] == "127.0.0.1:9000"
    assert "s3_secret_access_key" not in shown and "s3_session_token" not in shown
    assert SECRET not in repr(creds.object_store())


def test_spark_settings_keep_secrets_apart() -> None:
    creds = _creds()
    conf = profile_session.spark_conf(creds.session_spec())
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "AKIAEXAMPLE"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    assert not any(SECRET in v or TOKEN in v for v in conf.values())
    assert profile_session.s3_secrets(creds.session_spec()) == {"spark.hadoop.fs.s3a.secret.key": SECRET,
                                                                "spark.hadoop.fs.s3a.session.token": TOKEN}


def test_default_chain_without_keys() -> None:
    creds = _creds(s3_access_key_id=None, s3_secret_access_key=None, s3_session_token=None, s3_endpoint=None,
                   s3_url_style=None, s3_use_ssl=None)
    conf = profile_session.spark_conf(creds.session_spec())
    assert not any(k.startswith("spark.hadoop.fs.s3a.") and k != "spark.hadoop.fs.s3a.endpoint.region" for k in conf)
    assert profile_session.s3_secrets(creds.session_spec()) == {}


def test_local_lake_gets_no_s3_settings(tmp_path: object) -> None:
    conf = profile_session.spark_conf(_creds(data_path=f"{tmp_path}/data/").session_spec())
    assert not any("s3a" in k for k in conf) and "spark.driver.extraClassPath" not in conf


def test_s3a_data_path_is_stored_as_s3() -> None:
    assert _creds(data_path="s3a://bucket/lake/").data_path == "s3://bucket/lake/"


@pytest.mark.parametrize(("kw", "key"), [({"s3_url_style": "virtual"}, "s3_url_style"),
                                         ({"s3_secret_access_key": None}, "s3_secret_access_key")])
def test_bad_keys_are_named(kw: dict[str, object], key: str) -> None:
    with pytest.raises(DbtRuntimeError, match=key):
        _creds(**kw)


def test_connector_from_the_cache_or_the_users_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("DBT_DUCKLAKE_JARS", str(tmp_path))
    found, said = s3a.connector_status({})
    if not found:  # no hadoop-aws among Spark's own jars either
        assert "MISSING" in said and "spark.jars.packages" in said and s3a.HADOOP_AWS in said
    assert s3a.connector_conf({}, "local[1]") == {}
    for name in s3a.jar_names():
        (tmp_path / name).write_bytes(b"")  # type: ignore[operator]
    conf = s3a.connector_conf({}, "local[1]")
    assert list(conf) == ["spark.driver.extraClassPath"] and s3a.jar_names()[0] in conf["spark.driver.extraClassPath"]
    assert "spark.jars" in s3a.connector_conf({}, "spark://host:7077")  # a cluster's executors need them too
    # ... unless the cluster's executors have the connector on their class path: no 560 MB copy to each
    own = {"spark.executor.extraClassPath": "/opt/jars/hadoop-aws-3.4.1.jar:/opt/jars/bundle-2.24.6.jar"}
    assert list(s3a.connector_conf(own, "spark://host:7077")) == ["spark.driver.extraClassPath"]
    assert s3a.connector_conf({"spark.jars.packages": s3a.HADOOP_AWS}, "local[1]") == {}
    assert s3a.connector_status({"spark.jars.packages": s3a.HADOOP_AWS})[0]
