"""The driver's class-data-sharing archive (spark/env/class_archive.py): built, verified, mapped by new drivers, and never
given to a driver when it could crash it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dbt.adapters.ducklake.spark.env import class_archive as ca

# a child process: a driver started as the adapter starts it, logging where each class came from; it prints the
# source of SparkSession's class and a query's answer
_CHILD = textwrap.dedent("""
    import sys
    from dbt.adapters.ducklake.spark.env.session import build_session
    spark = build_session("local[1]", "archive-test", {"spark.ui.enabled": "false",
                          "spark.driver.extraJavaOptions": "-Xlog:class+load=info:file=" + sys.argv[1]},
                          log_file=sys.argv[2])
    print("ANSWER", spark.sql("SELECT sum(id) FROM range(10)").collect()[0][0])
""")


def _run_driver(tmp_path: Path, env: dict[str, str]) -> tuple[str, str]:
    """(the child's stdout, the class-load log's line for SparkSession)."""
    log = tmp_path / "classes.log"
    done = subprocess.run([sys.executable, "-c", _CHILD, str(log), str(tmp_path / "spark.log")], env=env,
                          capture_output=True, text=True, timeout=300, check=True)
    line = next(x for x in log.read_text().splitlines() if "org.apache.spark.sql.SparkSession " in x)
    return done.stdout, line


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This install's archive: the one scripts/setup.sh built, else one built here (about a minute)."""
    env_dir = os.environ.get(ca.ENV_DIR)
    path = ca.archive_path(ca.archive_key())
    if path.is_file():
        return path
    os.environ[ca.ENV_DIR] = str(tmp_path_factory.mktemp("archives"))
    try:
        built = ca.build()
    finally:
        if env_dir is None:
            del os.environ[ca.ENV_DIR]
        else:
            os.environ[ca.ENV_DIR] = env_dir
    assert built is not None and built.is_file()
    return built


def test_a_new_driver_maps_the_archive(archive: Path, tmp_path: Path) -> None:
    env = {**os.environ, ca.ENV_DIR: str(archive.parent)}
    out, line = _run_driver(tmp_path, env)
    assert "ANSWER 45" in out
    assert "shared objects file (top)" in line  # Spark's classes came from the archive


def test_off_switch_and_no_archive_start_a_plain_driver(archive: Path, tmp_path: Path) -> None:
    env = {**os.environ, ca.ENV_DIR: str(archive.parent), ca.ENV_SWITCH: "off"}
    out, line = _run_driver(tmp_path, env)
    assert "ANSWER 45" in out
    assert "shared objects file" not in line and ".jar" in line


def test_a_truncated_archive_fails_verification(archive: Path, tmp_path: Path) -> None:
    """A JVM that maps a truncated archive crashes: the build's verification step must reject it (it is never
    renamed into place), and the complete archive passes the same step."""
    cut = tmp_path / "cut.jsa"
    with open(archive, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(archive.stat().st_size // 3))
    verify = "-Xshare:on -XX:+VerifySharedSpaces"
    assert not ca._run_child("verify", f"-XX:SharedArchiveFile={cut} {verify}", 300)
    assert ca._run_child("verify", f"-XX:SharedArchiveFile={archive} {verify}", 300)


def test_options_only_for_an_existing_archive_and_a_plain_class_path(archive: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ca.ENV_DIR, str(archive.parent))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    assert ca.java_options(build_missing=False).startswith(f"-XX:SharedArchiveFile={archive} ")
    # settings that add jars to the driver: no archive (its classes would not match)
    assert ca.archive_key({"spark.jars.packages": "org.example:x:1.0"}) is None
    assert ca.java_options({"spark.driver.extraClassPath": "/x.jar"}, build_missing=False) == ""
    monkeypatch.setenv(ca.ENV_SWITCH, "off")
    assert ca.java_options(build_missing=False) == ""
    monkeypatch.delenv(ca.ENV_SWITCH)
    monkeypatch.setenv(ca.ENV_DIR, str(tmp_path / "empty"))
    assert ca.java_options(build_missing=False) == ""  # none built there


def test_one_background_build_per_key_and_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ca.ENV_DIR, str(tmp_path))
    proc = ca.start_background_build("k1")
    assert proc is not None
    try:
        assert ca.start_background_build("k1") is None  # attempted just now: not again
        assert (tmp_path / "spark-driver-k1.attempt").exists()
    finally:  # the build itself is tested above; stop this one (its own process group)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    old = tmp_path / "spark-driver-k1.attempt"
    os.utime(old, (0, 0))  # a day later: tried again
    proc = ca.start_background_build("k1")
    assert proc is not None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert not list(tmp_path.glob("*.jsa"))


def test_a_reinstalled_spark_gets_a_new_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM ignores an archive whose jars changed size or time (a re-created virtualenv at the same path): such
    an install must get an archive of its own, not keep a useless one forever."""
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"x")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    first = ca.archive_key()
    assert first is not None and ca.archive_key() == first
    os.utime(jars / "spark-core.jar", ns=(10**18, 10**18))
    assert ca.archive_key() != first


def test_a_new_archive_replaces_the_same_installs_older_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    root = tmp_path / "archives"
    root.mkdir()
    jars = os.path.realpath(tmp_path / "spark" / "jars")
    for key, where in (("old", jars), ("elsewhere", "/another/venv/pyspark/jars")):
        (root / f"spark-driver-{key}.jsa").write_bytes(b"x")
        (root / f"spark-driver-{key}.lock").write_bytes(b"")
        (root / f"spark-driver-{key}.jars").write_text(where)
    ca._replace_older(root, "new")
    assert sorted(p.name for p in root.iterdir()) == [
        "spark-driver-elsewhere.jars", "spark-driver-elsewhere.jsa", "spark-driver-elsewhere.lock",
        "spark-driver-new.jars"]
