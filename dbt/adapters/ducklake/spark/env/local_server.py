"""A warm local Spark server that successive processes on one machine share, started on first use.

Two kinds (`KINDS`): a **driver** (what `master: local-server` runs) is a Spark driver JVM with PySpark's Py4J
gateway, which each client process joins as its own driver would (`session.gateway_session`): every statement then
costs what it costs the embedded driver, and the JVM (warm, its code compiled) is not started again. A **connect**
server is a Spark Connect server (each statement a gRPC round trip; kept for clients that want Connect).

`attach()` finds the server for a scope (a lake) and its Spark settings, or starts one, and holds a lease on it for
the rest of the calling process. The server runs detached under a supervisor (`server_supervisor.py`) that stops it
after `idle_timeout` seconds without any leaseholder. Each server has a directory under the root
(`$DBT_DUCKLAKE_SERVER_DIR`, else `~/.cache/dbt-ducklake/servers`), named by a hash of what it was started with;
its files are described in `server_supervisor`.

One server per scope: Spark's in-memory session catalog (the databases and persistent views that give lake tables
their names) is shared by every Connect session of a server, so two lakes with a schema of the same name must not
share one. Processes working on the same lake with the same settings share its server.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyspark

from . import class_archive
from . import server_supervisor as sv
from .cache_dir import cache_root
from .session import DEFAULT_CONF, REQUIRED_CONF

ROOT_ENV = "DBT_DUCKLAKE_SERVER_DIR"
DEFAULT_IDLE_TIMEOUT = 1800.0  # seconds
START_TIMEOUT = 300.0  # seconds for a JVM to start listening on a loaded machine (one start takes 10-30 s here)
LOCK_TIMEOUT = 600.0  # seconds to wait for another process that checks, starts or stops the server
LOG_ROTATE_BYTES = 10 * 1024 * 1024  # server.log is moved to server.log.1 at a start past this size
SERVER_LOG4J = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2-connect-server.properties")

_LEASES: dict[str, BinaryIO] = {}  # server directory -> the open use.lock this process holds shared
KINDS = ("driver", "connect")
WHAT = {"driver": "Spark driver (Py4J gateway)", "connect": "Spark Connect server"}


class ServerError(RuntimeError):
    """The local server could not be started or reached (the message holds its log's last lines)."""


@dataclass(frozen=True)
class LocalServer:
    port: int
    token: str  # the Connect token or the gateway's secret: never to be shown
    pid: int
    directory: str
    log_path: str
    started: float  # epoch seconds
    idle_timeout: float
    fresh: bool  # started by this process
    kind: str = "driver"

    @property
    def url(self) -> str:
        """For SparkSession.builder.remote (a Connect server): holds the token, never to be shown."""
        return f"sc://localhost:{self.port}/;token={self.token}"

    @property
    def address(self) -> str:
        """Where it listens, for messages (no token)."""
        return address(self.kind, self.port)

    def describe(self) -> str:
        """One line for logs and `dbt debug`."""
        how = "started by this command" if self.fresh else f"reused, up {_age(time.time() - self.started)}"
        return (f"local {WHAT[self.kind]} at {self.address} (pid {self.pid}, {how}; stops after "
                f"{self.idle_timeout:g} s unused); log: {self.log_path}")


def address(kind: str, port: int) -> str:
    """Where a server of this kind listens, for messages (no token)."""
    return f"127.0.0.1:{port}" if kind == "driver" else f"sc://localhost:{port}"


def default_root() -> str:
    """Where server directories live: $DBT_DUCKLAKE_SERVER_DIR, else $XDG_CACHE_HOME or ~/.cache + dbt-ducklake."""
    given = os.environ.get(ROOT_ENV)
    if given:
        return os.path.abspath(os.path.expanduser(given))
    return str(cache_root() / "servers")


def server_settings(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """The Spark settings a server starts with: the layer's defaults, the caller's, the ones the layer needs.

    Raises:
        ValueError: conf contradicts a setting the layer needs.
    """
    settings = {**DEFAULT_CONF, "spark.master": master, "spark.pyspark.python": sys.executable,
                "spark.pyspark.driver.python": sys.executable}
    for key, value in conf.items():
        if key in REQUIRED_CONF and str(value).lower() != REQUIRED_CONF[key].lower():
            raise ValueError(f"Spark setting {key}={value!r} conflicts with what DuckLake needs ({REQUIRED_CONF[key]!r})")
        settings[key] = str(value)
    settings.update(REQUIRED_CONF)
    settings["spark.ui.enabled"] = "false"  # a daemon: no web UI port left open
    return settings


def server_dir(scope: str, master: str, conf: Mapping[str, str], root: str | None = None, *,
               kind: str = "driver") -> str:
    """The directory of the server for this scope, these settings and this kind (also keyed by pyspark and Python,
    so an upgrade or another virtualenv never reuses an older server)."""
    identity = {"scope": scope, "settings": server_settings(master, conf), "pyspark": pyspark.__version__,
                "python": sys.executable, "spark_home": _spark_home(), "kind": kind}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    return os.path.join(root or default_root(), key)


def attach(scope: str, label: str, master: str = "local[*]", conf: Mapping[str, str] | None = None, *,
           idle_timeout: float = DEFAULT_IDLE_TIMEOUT, root: str | None = None, kind: str = "driver") -> LocalServer:
    """The running server for scope and settings, started if there is none (or if it died), leased to this process
    until it exits. scope is hashed (it may hold secrets); label says what the server serves, in its files.

    Raises:
        ServerError: it did not start, or another process held its lock too long.
        ValueError: conf contradicts a setting the layer needs.
    """
    if kind not in KINDS:
        raise ValueError(f"no local server of kind {kind!r} (kinds: {', '.join(KINDS)})")
    conf = dict(conf or {})
    directory = server_dir(scope, master, conf, root, kind=kind)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)  # server.json holds the token
    start_lock = _wait_for_lock(os.path.join(directory, sv.START_LOCK))
    try:
        _write(os.path.join(directory, sv.IDLE_TIMEOUT), f"{idle_timeout:g}")
        info = _running(directory)
        fresh = info is None
        if info is None:
            info = _start(directory, label, master, conf, idle_timeout, kind)
        if directory not in _LEASES:
            lease = open(os.path.join(directory, sv.USE_LOCK), "ab")  # noqa: SIM115 - held until the process exits
            fcntl.flock(lease.fileno(), fcntl.LOCK_SH)  # waits at most for the supervisor's brief probe
            _LEASES[directory] = lease
        sv.touch(os.path.join(directory, sv.LAST_USED))
    finally:
        start_lock.close()
    return LocalServer(port=int(info["port"]), token=str(info["token"]), pid=int(info["pid"]), directory=directory,
                       log_path=str(info["log"]), started=float(info["started"]), idle_timeout=idle_timeout,
                       fresh=fresh, kind=str(info.get("kind", "connect")))


def release(directory: str) -> None:
    """Give up this process's lease (its exit does the same): the idle time counts from now."""
    lease = _LEASES.pop(directory, None)
    if lease is not None:
        sv.touch(os.path.join(directory, sv.LAST_USED))
        lease.close()


def status(directory: str) -> dict[str, Any] | None:
    """The running server of a directory (pid, port, started, log; no token), or None; starts nothing."""
    info = _running(directory, clean=False)
    return None if info is None else {k: v for k, v in info.items() if k != "token"}


def stop(directory: str) -> bool:
    """Stop the server of a directory now (whoever uses it); whether one was running."""
    start_lock = _wait_for_lock(os.path.join(directory, sv.START_LOCK))
    try:
        info = sv.read_json(os.path.join(directory, sv.SERVER))
        if info is None:
            return False
        _kill(directory, info)
        return True
    finally:
        start_lock.close()


def _running(directory: str, *, clean: bool = True) -> dict[str, Any] | None:
    """server.json's content if its server and supervisor live and the port answers; else None, and (with clean)
    whatever is left of a dead or half-dead server is killed and its server.json removed."""
    info = sv.read_json(os.path.join(directory, sv.SERVER))
    if info is None:
        return None
    if not _ours(int(info["pid"]), directory):
        why = f"its process {info['pid']} is gone"
    elif not _ours(int(info["supervisor_pid"]), directory, supervisor=True):
        why = f"its supervisor {info['supervisor_pid']} is gone (nothing would stop it when idle)"
    elif not _listens(int(info["port"])):
        why = f"it does not accept connections on port {info['port']}"
    else:
        return info
    if clean:
        _log_line(directory, f"client {os.getpid()}: the server of pid {info['pid']} is not usable ({why}): replaced")
        _kill(directory, info)
    return None


def _log_line(directory: str, message: str) -> None:
    with open(os.path.join(directory, sv.LOG), "a") as f:
        f.write(f"{time.strftime('%y/%m/%d %H:%M:%S')} dbt-ducklake {message}\n")


def _kill(directory: str, info: dict[str, Any]) -> None:
    """Stop a server and its supervisor (each only if it is still this directory's process), forget server.json."""
    for key, is_supervisor in (("supervisor_pid", True), ("pid", False)):
        pid = int(info.get(key) or 0)
        if pid and _ours(pid, directory, supervisor=is_supervisor):
            _terminate(pid)
    path = os.path.join(directory, sv.SERVER)
    if os.path.exists(path):
        os.remove(path)


def _terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + sv.STOP_GRACE_SECONDS + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _start(directory: str, label: str, master: str, conf: Mapping[str, str], idle_timeout: float,
           kind: str) -> dict[str, Any]:
    """Start a supervisor and its server; server.json's content once the server listens."""
    log_path = os.path.join(directory, sv.LOG)
    if os.path.exists(log_path) and os.path.getsize(log_path) > LOG_ROTATE_BYTES:
        os.replace(log_path, log_path + ".1")
    for name in (sv.SUPERVISOR_PID, sv.SERVER):
        if os.path.exists(os.path.join(directory, name)):
            os.remove(os.path.join(directory, name))
    settings = server_settings(master, conf)
    settings["spark.sql.warehouse.dir"] = os.path.join(directory, "warehouse")  # CREATE DATABASE makes folders there
    env = {"SPARK_HOME": _spark_home(), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    token = ""
    if kind == "connect":
        token = secrets.token_hex(24)
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token  # not on the command line, where `ps` would show it
        settings.update({"spark.connect.grpc.binding.address": "127.0.0.1",
                         "spark.connect.grpc.binding.port": str(_free_port())})
    java_options = (f"-Dlog4j2.configurationFile=file:{SERVER_LOG4J} -Dducklake.spark.log={log_path} "
                    f"-Dducklake.server.dir={directory}")  # the directory in its command line: see _ours
    if kind == "driver":  # the embedded driver's class archive fits the same JVM: a quicker first start
        java_options += " " + class_archive.java_options(conf, build_missing=False)
    extra = settings.pop("spark.driver.extraJavaOptions", "")
    command = [os.path.join(_spark_home(), "bin", "spark-submit")]
    if kind == "connect":
        command += ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    command += ["--name", "dbt-ducklake-server", "--master", settings.pop("spark.master"),
                "--driver-java-options", f"{extra} {java_options}".strip()]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    if kind == "connect":
        command.append("spark-internal")  # the primary resource of an internal class (as sbin/start-connect-server.sh)
    else:
        command.append("pyspark-shell")  # PySpark's gateway: the JVM a Python driver talks to through Py4J
        env["SPARK_CONNECT_MODE"] = "0"
    launch = {"dir": directory, "command": command, "env": env, "token": token, "key": os.path.basename(directory),
              "label": label, "master": master, "idle_timeout": idle_timeout, "ready_timeout": START_TIMEOUT,
              "kind": kind}
    sv.write_json(os.path.join(directory, sv.LAUNCH), launch)
    with open(log_path, "ab") as log:
        log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting a server for {label} ---\n".encode())
        log.flush()
        # -I: the script's folder (spark/, with a types.py) must not shadow the standard library
        proc = subprocess.Popen([sys.executable, "-I", sv.__file__, os.path.join(directory, sv.LAUNCH)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=directory)
    proc.wait()  # the first process forks the supervisor and exits at once
    deadline = time.monotonic() + START_TIMEOUT + 10
    while time.monotonic() < deadline:
        info = sv.read_json(os.path.join(directory, sv.SERVER))
        if info is not None:
            return info
        pid = _read_pid(os.path.join(directory, sv.SUPERVISOR_PID))
        if proc.returncode != 0 or (pid is not None and not _alive(pid)):
            break
        time.sleep(0.2)
    pid = _read_pid(os.path.join(directory, sv.SUPERVISOR_PID))
    if pid is not None and _alive(pid):
        _terminate(pid)
    raise ServerError(f"the local {WHAT[kind]} did not start (log: {log_path}):\n{_tail(log_path)}")


def _wait_for_lock(path: str) -> BinaryIO:
    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        f = sv.try_lock(path, fcntl.LOCK_EX)
        if f is not None:
            return f
        if time.monotonic() > deadline:
            raise ServerError(f"another process held {path} for {LOCK_TIMEOUT:g} s (starting or stopping the server)")
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(0) is all there is


def _ours(pid: int, directory: str, *, supervisor: bool = False) -> bool:
    """The pid is alive and is this directory's server (or supervisor), not a process that got its pid later."""
    if not _alive(pid):
        return False
    cmd = _command_line(pid)
    if not cmd:
        return True  # cannot tell: the port check decides
    marker = os.path.join(directory, sv.LAUNCH) if supervisor else f"-Dducklake.server.dir={directory}"
    return marker in cmd


def _command_line(pid: int) -> str:
    """A process's command line ("" if it cannot be read): /proc on Linux, else `ps`."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return ""  # gone meanwhile
    except OSError:
        return ""
    try:
        return subprocess.run(["ps", "-ww", "-o", "args=", "-p", str(pid)], capture_output=True, text=True,
                              timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _listens(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> str:
    return os.environ.get("SPARK_HOME") or os.path.dirname(os.path.abspath(pyspark.__file__))


def _read_pid(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _tail(path: str, lines: int = 30) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"<{e}>"


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def stop_all(root: str) -> list[str]:
    """Stop every server under root (for tests and clean-ups); the directories of those that were running."""
    if not os.path.isdir(root):
        return []
    directories = [os.path.join(root, name) for name in sorted(os.listdir(root))]
    return [d for d in directories if os.path.isdir(d) and stop(d)]
