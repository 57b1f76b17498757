"""Spark's S3 connector (hadoop-aws's s3a file system): which jars, where scripts/setup.sh caches them, and the
`spark.hadoop.fs.s3a.*` settings a lake on S3 needs.

pyspark 4.0.1 ships the Hadoop 3.4.1 client, so the connector must be hadoop-aws 3.4.1 with the AWS SDK v2 bundle
that hadoop-aws 3.4.1 declares (2.24.6): another Hadoop version fails at class loading, not at configuration.
Run as `python -m dbt.adapters.ducklake.spark.s3a coordinates` it prints the Maven coordinates and the cache
directory, so that setup.sh and this module cannot disagree.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.4.1"
AWS_SDK_BUNDLE = "software.amazon.awssdk:bundle:2.24.6"
COORDINATES = (HADOOP_AWS, AWS_SDK_BUNDLE)
S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
# what a user adds when the connector is missing: the packages Spark resolves itself at start
PACKAGES_HINT = f"spark_config: {{spark.jars.packages: \"{HADOOP_AWS}\"}}"
OBJECT_STORE_SCHEMES = ("s3://", "s3a://")


def is_object_store(path: str) -> bool:
    """Whether a lake path is on S3 (s3:// as DuckDB writes it, or s3a://)."""
    return path.startswith(OBJECT_STORE_SCHEMES)


def to_spark(path: str) -> str:
    """The path as Spark reaches it: s3:// becomes s3a:// (Hadoop's s3:// is not the S3 connector)."""
    return "s3a://" + path[len("s3://"):] if path.startswith("s3://") else path


def from_spark(path: str) -> str:
    """The path as the catalog stores it (s3://, as DuckDB writes it) from a path Spark gave (s3a://)."""
    return "s3://" + path[len("s3a://"):] if path.startswith("s3a://") else path


def jars_dir() -> str:
    """Where scripts/setup.sh puts the connector's jars (DBT_DUCKLAKE_JARS, else ~/.cache/dbt-ducklake/jars)."""
    return os.environ.get("DBT_DUCKLAKE_JARS") or os.path.join(os.path.expanduser("~"), ".cache", "dbt-ducklake", "jars")


def jar_names() -> list[str]:
    """File names `mvn dependency:copy` gives the connector's jars."""
    return [f"{c.split(':')[1]}-{c.split(':')[2]}.jar" for c in COORDINATES]


def cached_jars() -> list[str] | None:
    """The connector's cached jars, or None when any is missing."""
    paths = [os.path.join(jars_dir(), name) for name in jar_names()]
    return paths if all(os.path.isfile(p) for p in paths) else None


def user_supplies_connector(conf: Mapping[str, str]) -> bool:
    """Whether the profile's Spark settings bring the connector themselves (packages or jars naming hadoop-aws)."""
    return any("hadoop-aws" in str(conf.get(k, "")) for k in ("spark.jars.packages", "spark.jars",
                                                              "spark.driver.extraClassPath"))


def connector_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """Settings that put the cached connector jars on the driver's and executors' class path, unless the user's
    settings bring the connector (their packages, jars, or a cluster's own class path win)."""
    if user_supplies_connector(conf):
        return {}
    jars = cached_jars()
    if jars is None:
        return {}
    # spark.jars also reaches executors of a cluster; local-mode executors share the driver's class loader
    given = str(conf.get("spark.jars", ""))
    return {"spark.jars": ",".join([j for j in given.split(",") if j] + jars)}


def hadoop_conf(*, key_id: str | None, secret: str | None, session_token: str | None, region: str | None,
                endpoint: str | None, url_style: str | None, use_ssl: bool | None) -> dict[str, str]:
    """The `spark.hadoop.fs.s3a.*` settings of a profile's S3 keys. Without keys, s3a's default chain applies
    (environment, ~/.aws, instance profile), as DuckDB's credential_chain does."""
    out: dict[str, str] = {}
    if endpoint:
        # s3a takes host[:port] or a URL; with use_ssl false a bare host must be reached over http
        scheme = "https" if use_ssl in (None, True) else "http"
        out["spark.hadoop.fs.s3a.endpoint"] = endpoint if "://" in endpoint else f"{scheme}://{endpoint}"
    if use_ssl is not None:
        out["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(bool(use_ssl)).lower()
    if url_style:
        out["spark.hadoop.fs.s3a.path.style.access"] = str(url_style == "path").lower()
    if region:
        out["spark.hadoop.fs.s3a.endpoint.region"] = region
    if key_id and secret:
        provider = ("org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider" if session_token
                    else "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
        out["spark.hadoop.fs.s3a.aws.credentials.provider"] = provider
        out["spark.hadoop.fs.s3a.access.key"] = key_id
        out["spark.hadoop.fs.s3a.secret.key"] = secret
        if session_token:
            out["spark.hadoop.fs.s3a.session.token"] = session_token
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["coordinates"]:
        print(jars_dir())
        print("\n".join(COORDINATES))
    else:
        sys.exit("usage: python -m dbt.adapters.ducklake.spark.s3a coordinates")
