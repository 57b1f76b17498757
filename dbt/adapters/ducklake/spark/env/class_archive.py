"""A class-data-sharing archive (JDK AppCDS) of the classes a Spark driver loads, so that a new process's driver JVM
maps them from one file instead of finding, reading and verifying them in ~250 jars.

Why: every dbt invocation on the embedded default starts a driver JVM. With the archive, start-up took 2.3 s instead
of 3.6 s and the first query 1.4 s instead of 2.3 s on the 2-core machine of docs/benchmarks.md ("JVM start").

How it is made safe:
- One archive per JDK and Spark install (`archive_key`: the java binary, the JDK's module image, pyspark's version
  and its jar names). A JVM whose class path differs from the archive's ignores it (no sharing, no error), so a
  stale archive costs nothing; settings that add jars (`spark.jars`, ...) skip it altogether.
- A truncated archive crashes the JVM that maps it (SIGBUS), so only a finished and verified archive is ever given
  to a driver: a JVM that ran a small workload writes it at exit (-XX:ArchiveClassesAtExit) under a temporary name,
  a second JVM started with it (-Xshare:on, checksums verified) must run a query, and only then is it renamed into
  place (an atomic rename, never rewritten in place).
- It is built by `scripts/setup.sh` (`python -m dbt.adapters.ducklake.spark.env.class_archive build`) or, the first
  time a driver starts without one, by a detached low-priority process in the background (at most one attempt per
  key a day), so no dbt invocation waits for it.

Kept in $DBT_DUCKLAKE_CLASS_ARCHIVE_DIR, else $XDG_CACHE_HOME (or ~/.cache)/dbt-ducklake/class-archives (about
150 MB per key); off with DBT_DUCKLAKE_CLASS_ARCHIVE=off.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from .cache_dir import cache_root

ENV_SWITCH = "DBT_DUCKLAKE_CLASS_ARCHIVE"  # "off" disables use and building
ENV_DIR = "DBT_DUCKLAKE_CLASS_ARCHIVE_DIR"
RETRY_SECONDS = 86_400.0  # a failed background build is tried again after this long
STALE_TMP_SECONDS = 3_600.0  # a temporary archive this old belongs to a build that died
BUILD_TIMEOUT = 900.0  # seconds for each of the two JVMs of a build (a loaded machine)
# settings that change the driver's class path: its classes would not match an archive built without them
CLASSPATH_CONF = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath", "spark.jars.ivy",
                  "spark.jars.repositories", "spark.driver.userClassPathFirst")
# keep the JVM quiet about the archive (a class path mismatch is reported on the driver's stdout otherwise)
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
MODULE = "dbt.adapters.ducklake.spark.env.class_archive"  # run as a module by its builds (__name__ is __main__ there)
WORKLOAD = "dbt.adapters.ducklake.spark.env.class_archive_workload"


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("off", "0", "false", "no")


def archive_dir() -> Path:
    root = os.environ.get(ENV_DIR)
    return Path(root) if root else cache_root() / "class-archives"


def _java() -> Path | None:
    """The java binary spark-submit runs: $JAVA_HOME/bin/java, else java on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and os.path.exists(found) else None


def _spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(os.path.realpath(_find_spark_home()))


def archive_key(conf: Mapping[str, str] | None = None) -> str | None:
    """What the archive's classes depend on, hashed; None when no archive applies (no java, or settings or
    PYSPARK_SUBMIT_ARGS that change the driver's class path)."""
    conf = conf or {}
    if any(conf.get(k) for k in CLASSPATH_CONF) or os.environ.get("PYSPARK_SUBMIT_ARGS"):
        return None
    java = _java()
    if java is None:
        return None
    import pyspark

    parts = [str(java), str(java.stat().st_mtime_ns), pyspark.__version__]
    modules = java.parent.parent / "lib" / "modules"  # the JDK's class image: changes with every JDK update
    if modules.exists():
        st = modules.stat()
        parts += [str(st.st_size), str(st.st_mtime_ns)]
    jars = _spark_home() / "jars"
    parts.append(str(jars))
    if jars.is_dir():  # the JVM checks each jar's size and time: a re-installed Spark needs an archive of its own
        for e in sorted(os.scandir(jars), key=lambda e: e.name):
            st = e.stat()
            parts.append(f"{e.name} {st.st_size} {st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def archive_path(key: str) -> Path:
    return archive_dir() / f"spark-driver-{key}.jsa"


def _key(conf: Mapping[str, str] | None) -> tuple[str | None, str]:
    """(this install's archive key, "") or (None, why no archive applies)."""
    if not enabled():
        return None, f"off ({ENV_SWITCH})"
    try:
        key = archive_key(conf)
    except OSError as e:
        return None, f"not used ({e})"
    if key is None:
        return None, "not used (no java found, or settings that change the driver's class path)"
    return key, ""


def java_options(conf: Mapping[str, str] | None = None, *, build_missing: bool = True) -> str:
    """The driver JVM options that map the archive, or "" (none applies, or it is not built yet: then, with
    build_missing, a background build is started)."""
    key, _why = _key(conf)
    if key is None:
        return ""
    path = archive_path(key)
    if path.is_file():
        return f"-XX:SharedArchiveFile={path} {QUIET}"
    if build_missing:
        start_background_build(key)
    return ""


def status(conf: Mapping[str, str] | None = None) -> str:
    """The archive as `dbt debug` shows it (builds nothing)."""
    key, why = _key(conf)
    if key is None:
        return why
    path = archive_path(key)
    if path.is_file():
        return f"{path} ({path.stat().st_size // 2**20} MB): drivers start with it"
    return f"not built yet: the next Spark start builds it in the background ({path}), or: python -m {MODULE}"


def start_background_build(key: str) -> subprocess.Popen | None:
    """Start a detached, low-priority build of the archive unless one was attempted in the last RETRY_SECONDS; the
    build's process, or None."""
    root = archive_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        marker = root / f"spark-driver-{key}.attempt"
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if time.time() - marker.stat().st_mtime < RETRY_SECONDS:
                return None
            os.utime(marker)
        else:
            os.close(fd)
        log = open(root / f"spark-driver-{key}.log", "ab")  # noqa: SIM115 - handed to the child
    except OSError:
        return None
    with log:
        return subprocess.Popen([sys.executable, "-m", MODULE, "build", "--nice"], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True, close_fds=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build(timeout: float = BUILD_TIMEOUT) -> Path | None:
    """Make the archive for this install if it is missing (see the module); its path, or None when none applies or
    the build failed (the reason is printed)."""
    key = archive_key()
    if key is None:
        print("class archive: not applicable (no java, or a changed driver class path)")
        return None
    root = archive_dir()
    root.mkdir(parents=True, exist_ok=True)
    final = archive_path(key)
    with _locked(root / f"spark-driver-{key}.lock"):
        if final.is_file():
            print(f"class archive: {final} (built before)")
            return final
        for old in root.glob("*.tmp.jsa"):
            with contextlib.suppress(OSError):
                if time.time() - old.stat().st_mtime > STALE_TMP_SECONDS:
                    old.unlink()
        tmp = root / f"spark-driver-{key}.{os.getpid()}.tmp.jsa"
        try:
            t0 = time.monotonic()
            if not _run_child("workload", f"-XX:ArchiveClassesAtExit={tmp}", timeout) or not tmp.is_file():
                print("class archive: the workload JVM did not write an archive")
                return None
            # -Xshare:on: a JVM that cannot map it fails instead of silently running without it
            if not _run_child("verify", f"-XX:SharedArchiveFile={tmp} -Xshare:on -XX:+VerifySharedSpaces", timeout):
                print("class archive: a JVM could not start and run a query with the new archive")
                return None
            os.replace(tmp, final)
            _replace_older(root, key)
            print(f"class archive: {final} ({final.stat().st_size // 2**20} MB, {time.monotonic() - t0:.0f} s)")
            return final
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _replace_older(root: Path, key: str) -> None:
    """Note which Spark install the new archive is for, and remove the archives of earlier installs at the same
    place (a virtualenv re-created or upgraded: the JVM would ignore them; 160 MB each)."""
    jars = str(_spark_home() / "jars")
    (root / f"spark-driver-{key}.jars").write_text(jars)
    for note in root.glob("spark-driver-*.jars"):
        other = note.name[len("spark-driver-"):-len(".jars")]
        with contextlib.suppress(OSError):
            if other != key and note.read_text() == jars:
                for leftover in root.glob(f"spark-driver-{other}.*"):
                    leftover.unlink()


def _run_child(step: str, options: str, timeout: float) -> bool:
    env = {**os.environ, ENV_SWITCH: "off"}  # the child's own session must neither use nor build an archive
    # a JVM that cannot map an archive may crash: its report goes to the temporary directory, not the caller's
    options += f" -XX:ErrorFile={tempfile.gettempdir()}/ducklake-class-archive-jvm-crash-%p.log"
    try:
        done = subprocess.run([sys.executable, "-m", WORKLOAD, step, f"--java-options={options}"], env=env,
                              stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build the Spark driver's class-data-sharing archive (see the module).")
    ap.add_argument("step", choices=["build"], nargs="?", default="build")
    ap.add_argument("--nice", action="store_true", help="at the lowest CPU priority (a background build)")
    args = ap.parse_args(argv)
    if args.nice:
        with contextlib.suppress(OSError):
            os.nice(19)
    if not enabled():
        print(f"class archive: off ({ENV_SWITCH})")
        return 0
    return 0 if build() is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
