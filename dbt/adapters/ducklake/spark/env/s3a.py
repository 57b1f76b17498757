"""Spark's S3 connector (hadoop-aws's s3a file system): which jars, where scripts/setup.sh caches them, and the
`spark.hadoop.fs.s3a.*` settings a lake on S3 needs.

pyspark 4.0.1 ships the Hadoop 3.4.1 client, so the connector must be hadoop-aws 3.4.1 with the AWS SDK v2 bundle
that hadoop-aws 3.4.1 declares (2.24.6): another Hadoop version fails at class loading, not at configuration.
Run as `python -m dbt.adapters.ducklake.spark.env.s3a coordinates` it prints the Maven coordinates and the cache
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


def connector_conf(conf: Mapping[str, str], master: str) -> dict[str, str]:
    """Settings that put the cached connector jars on the driver's class path (and, for a cluster, the executors'),
    unless the user's settings bring the connector (their packages, jars, or a cluster's own class path win).

    The driver's class path, not spark.jars: Hadoop finds file systems through the class loader its configuration
    was made with, which jars added to a running context do not reach. Local executors share the driver's JVM, and
    spark.jars would copy the 560 MB SDK bundle into each session's work directory."""
    if user_supplies_connector(conf):
        return {}
    jars = cached_jars()
    if jars is None:
        return {}
    given = str(conf.get("spark.driver.extraClassPath", ""))
    out = {"spark.driver.extraClassPath": os.pathsep.join([p for p in given.split(os.pathsep) if p] + jars)}
    # a cluster whose executors have the connector on their own class path needs no copy of it (spark.jars would
    # ship the SDK bundle to every executor's work directory at its start)
    if not master.startswith("local") and "hadoop-aws" not in str(conf.get("spark.executor.extraClassPath", "")):
        jars_given = str(conf.get("spark.jars", ""))
        out["spark.jars"] = ",".join([j for j in jars_given.split(",") if j] + jars)
    return out


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


# settings kept out of SparkConf (which Spark prints and hands to every job): set on the running context's Hadoop
# configuration instead (spark/env/session.py set_hadoop_conf)
SECRET_KEYS = ("spark.hadoop.fs.s3a.secret.key", "spark.hadoop.fs.s3a.session.token")


def split_secrets(settings: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(settings fit for SparkConf, secret settings) of hadoop_conf's output."""
    return ({k: v for k, v in settings.items() if k not in SECRET_KEYS},
            {k: v for k, v in settings.items() if k in SECRET_KEYS})


def connector_status(conf: Mapping[str, str]) -> tuple[bool, str]:
    """(found, what `dbt debug` says) about the s3a connector, without starting Spark: the profile's packages or
    jars, the jars scripts/setup.sh cached, or hadoop-aws among Spark's own jars (a cluster's installation)."""
    if user_supplies_connector(conf):
        return True, "from spark_config (hadoop-aws in spark.jars.packages / spark.jars / extraClassPath)"
    jars = cached_jars()
    if jars is not None:
        return True, f"hadoop-aws and the AWS SDK bundle from {jars_dir()}"
    try:
        from pyspark.find_spark_home import _find_spark_home

        spark_jars = os.path.join(_find_spark_home(), "jars")
        own = [n for n in os.listdir(spark_jars) if n.startswith("hadoop-aws")]
    except Exception:  # noqa: BLE001 - no readable Spark installation: nothing found there
        own = []
    if own:
        return True, f"{own[0]} among Spark's jars"
    return False, (f"MISSING: no {S3A_CLASS} on Spark's class path, which data paths on s3:// need. Run "
                   f"scripts/setup.sh (caches {HADOOP_AWS} and {AWS_SDK_BUNDLE} in {jars_dir()}), or add "
                   f"{PACKAGES_HINT} to the profile")


if __name__ == "__main__":
    if sys.argv[1:] == ["coordinates"]:
        print(jars_dir())
        print("\n".join(COORDINATES))
    else:
        sys.exit("usage: python -m dbt.adapters.ducklake.spark.env.s3a coordinates")
