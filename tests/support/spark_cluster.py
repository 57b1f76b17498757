"""A Spark standalone cluster (one master, one worker), or a Spark Connect server, on 127.0.0.1, started with the
pyspark package's own scripts.

Only one SparkContext can live in a process and the test process already has a local one, so code that talks to the
cluster runs in a child Python process (`run_python`). Master, worker and that child each get their own process
group, killed whole on the way out (the worker's executors and their Python workers are in the worker's group).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pyspark

REPO_ROOT = Path(__file__).resolve().parents[2]
_MASTER_PORT = re.compile(r"Successfully started service 'sparkMaster' on port (\d+)")
_MASTER_UI_PORT = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")
_T = TypeVar("_T")
# Short-lived JVMs on a small machine: the C1 compiler only and a serial GC start faster and burn far less CPU (roughly
# halves the cluster test's CPU time); for daemons here, for a driver and executors as spark.{driver,executor}.extraJavaOptions.
C1_ONLY = "-XX:TieredStopAtLevel=1"
FAST_JVM_OPTIONS = f"{C1_ONLY} -XX:+UseSerialGC"


class ClusterError(RuntimeError):
    """The cluster did not come up (the message holds the daemons' log tails)."""


def spark_home() -> str:
    """The pyspark package's directory: it has bin/spark-class and jars/, which is all a standalone daemon needs."""
    return os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"<{path}: {e}>"
    return "\n".join(text.splitlines()[-lines:])


def _kill_group(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the process's group (it leads its own session); SIGKILL what is left of the group after the leader
    exited or after grace seconds (executors and Python workers of a worker must not outlive it)."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@dataclass
class StandaloneCluster:
    root: Path
    master_url: str = ""
    web_url: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def work_dir(self) -> Path:
        """The worker's directory: one app-*/<executor id>/ directory per executor (its cwd, stdout, stderr)."""
        return self.root / "work"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def env(self) -> dict[str, str]:
        """The environment of the daemons and of the driver process."""
        conf_dir = self.root / "conf"  # empty: no spark-defaults.conf or spark-env.sh from anywhere else
        conf_dir.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_HOME": spark_home(),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",  # master and worker heaps (default 1g each)
            "SPARK_DAEMON_JAVA_OPTS": FAST_JVM_OPTIONS,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }

    def state(self) -> dict:
        """The master's JSON status (workers, apps)."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as resp:
            return json.load(resp)

    def logs(self, lines: int = 40) -> str:
        parts = [f"--- {p.name} (last {lines} lines) ---\n{tail(p, lines)}" for p in sorted(self.log_dir.glob("*.log"))]
        for p in sorted(self.work_dir.glob("app-*/*/stderr")):
            parts.append(f"--- executor {p.parent.name} of {p.parent.parent.name} stderr ---\n{tail(p, lines)}")
        return "\n".join(parts)

    def _spawn(self, name: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env(), cwd=self.root,
                start_new_session=True,
            )
        self.processes[name] = proc
        return proc

    def _fail(self, why: str) -> ClusterError:
        return ClusterError(f"Spark standalone cluster: {why}\n{self.logs()}")

    def _wait(self, what: str, deadline: float, check: Callable[[], _T | None]) -> _T:
        while True:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise self._fail(f"the {name} exited with code {proc.returncode} while waiting for {what}")
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                raise self._fail(f"timed out waiting for {what}")
            time.sleep(0.25)

    def start(self, *, cores: int = 1, memory: str = "1g", timeout: float = 90.0) -> None:
        """Start the master, then one worker, and return once the master counts the worker as alive."""
        deadline = time.monotonic() + timeout
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(free_port()), "--webui-port", str(free_port())])
        master_log = self.log_dir / "master.log"

        def master_ports() -> tuple[str, str] | None:
            text = master_log.read_text(errors="replace")
            # the ports actually bound (Spark moves on to the next port if the one given was taken meanwhile)
            rpc, ui = _MASTER_PORT.search(text), _MASTER_UI_PORT.search(text)
            return (rpc.group(1), ui.group(1)) if rpc and ui and "New state: ALIVE" in text else None

        rpc_port, ui_port = self._wait("the master", deadline, master_ports)
        self.master_url, self.web_url = f"spark://127.0.0.1:{rpc_port}", f"http://127.0.0.1:{ui_port}"
        self._spawn("worker", ["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                               "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                               "--work-dir", str(self.work_dir)])

        def worker_alive() -> bool:
            try:
                state = self.state()
            except OSError:
                return False
            return state.get("aliveworkers", 0) >= 1

        self._wait("the worker to register with the master", deadline, worker_alive)

    def stop(self) -> None:
        for name in ("worker", "master"):  # the worker first: it stops its executors
            proc = self.processes.get(name)
            if proc is not None:
                _kill_group(proc)


@contextmanager
def standalone_cluster(root: Path, *, cores: int = 1, memory: str = "1g",
                       timeout: float = 90.0) -> Iterator[StandaloneCluster]:
    """A running master + worker under root (logs/, work/, conf/), stopped (process groups killed) on exit.

    Raises:
        ClusterError: a daemon exited or the worker was not registered within timeout seconds (with log tails).
    """
    root.mkdir(parents=True, exist_ok=True)
    cluster = StandaloneCluster(root)
    try:
        cluster.start(cores=cores, memory=memory, timeout=timeout)
        yield cluster
    finally:
        cluster.stop()


_CONNECT_STARTED = re.compile(r"Spark Connect server started at: [^\s]*:(\d+)")


@dataclass
class ConnectServer:
    """A Spark Connect server (`SparkConnectServer`, the spark-connect jar of the pyspark package) on 127.0.0.1.

    Its driver runs the given master (local[N]) in the server's JVM; clients reach it at `url` (sc://127.0.0.1:port).
    """

    root: Path
    url: str = ""
    process: subprocess.Popen[bytes] | None = None
    # another interpreter whose pyspark (and Python workers) serve: a client of another minor version than the server
    python: str | None = None

    @property
    def log_path(self) -> Path:
        return self.root / "logs" / "connect-server.log"

    @property
    def home(self) -> str:
        if self.python is None:
            return spark_home()
        return subprocess.run([self.python, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                              check=True, capture_output=True, text=True).stdout.strip()

    def env(self) -> dict[str, str]:
        """The environment of the server (and of a client process: a Connect client reads none of it)."""
        conf_dir = self.root / "conf"  # empty: no spark-defaults.conf or spark-env.sh from anywhere else
        conf_dir.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_HOME": self.home,
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": self.python or sys.executable,
            "PYSPARK_DRIVER_PYTHON": self.python or sys.executable,
        }

    def logs(self, lines: int = 40) -> str:
        return f"--- {self.log_path.name} (last {lines} lines) ---\n{tail(self.log_path, lines)}"

    def start(self, *, master: str = "local[2]", memory: str = "512m", conf: dict[str, str] | None = None,
              timeout: float = 90.0) -> None:
        """Start the server and return once its gRPC port accepts connections."""
        home = self.home
        jars = os.path.join(home, "jars")
        if not any(n.startswith("spark-connect_") for n in os.listdir(jars)):
            raise ClusterError(f"no spark-connect jar in {jars}: this pyspark cannot run a Connect server")
        port = free_port()
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.catalogImplementation": "in-memory",  # no Hive metastore (faster start, no derby files)
            **(conf or {}),
        }
        args = [os.path.join(home, "bin", "spark-submit"),
                "--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--name", "spark-connect-test",
                "--master", master, "--driver-memory", memory, "--driver-java-options", FAST_JVM_OPTIONS]
        for key, value in settings.items():
            args += ["--conf", f"{key}={value}"]
        args.append("spark-internal")  # the primary resource of an internal class (as sbin/start-connect-server.sh)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env(), cwd=self.root, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise ClusterError(f"the Spark Connect server exited with code {self.process.returncode}\n"
                                   f"{self.logs()}")
            found = _CONNECT_STARTED.search(self.log_path.read_text(errors="replace"))
            if found:  # the port actually bound (Spark moves on to the next one if the given one was taken)
                with suppress(OSError), socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=2):
                    self.url = f"sc://127.0.0.1:{found.group(1)}"
                    return
            if time.monotonic() > deadline:
                raise ClusterError(f"the Spark Connect server did not listen within {timeout} s\n{self.logs()}")
            time.sleep(0.25)

    def stop(self) -> None:
        if self.process is not None:
            _kill_group(self.process)


@contextmanager
def connect_server(root: Path, *, master: str = "local[2]", memory: str = "512m", conf: dict[str, str] | None = None,
                   timeout: float = 90.0, python: str | None = None) -> Iterator[ConnectServer]:
    """A running Spark Connect server under root (logs/, conf/, its cwd), stopped (process group killed) on exit;
    python: another interpreter whose pyspark serves (default: this one's).

    Raises:
        ClusterError: the server exited, or did not accept connections within timeout seconds (with its log tail).
    """
    root.mkdir(parents=True, exist_ok=True)
    server = ConnectServer(root, python=python)
    try:
        server.start(master=master, memory=memory, conf=conf, timeout=timeout)
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class ChildResult:
    returncode: int
    stdout: str
    stderr: str

    def last_json(self) -> dict:
        """The last stdout line that is a JSON object (the child's result)."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise ValueError("the child printed no JSON result line")


def run_python(args: Sequence[str], *, env: dict[str, str], log_dir: Path, timeout: float) -> ChildResult:
    """Run `python <args>` from the repository root in its own process group; killed whole after timeout seconds.

    stdout and stderr go to files in log_dir (no pipe to fill up) and are returned.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / "child.stdout", log_dir / "child.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, *args], stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                cwd=REPO_ROOT, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc, grace=5.0)
            raise TimeoutError(f"python {' '.join(args)} did not finish in {timeout} s\n"
                               f"--- stdout ---\n{tail(out_path)}\n--- stderr ---\n{tail(err_path)}") from None
        finally:
            _kill_group(proc, grace=5.0)  # whatever is left of its group (a driver JVM), or all of it if interrupted
    return ChildResult(proc.returncode, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"))
