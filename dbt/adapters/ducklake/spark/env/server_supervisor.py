"""The supervisor of a warm local Spark server: starts it, publishes where it listens, stops it when idle.

The server is either a Spark driver JVM that clients join through Py4J (`kind` "driver", what `master: local-server`
runs: each client gets the embedded driver's per-statement cost without a JVM start), or a Spark Connect server
(`kind` "connect"). A driver JVM exits when its standard input closes: the supervisor holds that pipe, so the JVM
never outlives it.

Standard library only: it is run by path (`python -I server_supervisor.py <dir>/launch.json`), detached from the process
that asked for the server, and must not hold the adapter's imports in memory for hours. The files of one server's
directory (all names below) are the whole protocol between clients and this process:

- `launch.json`: what to run (written by the client before the supervisor starts).
- `server.json`: the running server (pid, port, token, log, when it started); present only while it serves.
- `gateway.info`: written by a driver JVM once its Py4J gateway listens (port and secret); read and removed by the
  supervisor.
- `start.lock`: held exclusively by a client while it checks or starts the server, and by the supervisor while it
  stops it, so a client never attaches to a server being stopped and two clients never start two servers.
- `use.lock`: held shared by every client process for its lifetime (the OS releases it when a client dies, even by
  SIGKILL); the supervisor probes it exclusively to learn whether anyone uses the server.
- `last-used`: its mtime is the last time a client attached or let go.
- `idle-timeout`: seconds without a client after which the server stops (the latest client's setting wins).
- `server.log`: the server's output and Spark's warnings (the supervisor's own notes too).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, BinaryIO

LAUNCH = "launch.json"
SERVER = "server.json"
START_LOCK = "start.lock"
USE_LOCK = "use.lock"
LAST_USED = "last-used"
IDLE_TIMEOUT = "idle-timeout"
LOG = "server.log"
SUPERVISOR_PID = "supervisor.pid"
GATEWAY_INFO = "gateway.info"

STARTED = re.compile(rb"Spark Connect server started at: \S*:(\d+)")
STOP_GRACE_SECONDS = 20.0  # a SIGTERMed server runs Spark's shutdown hooks; after this it is killed


def try_lock(path: str, mode: int) -> BinaryIO | None:
    """The file opened and flock'ed with mode (LOCK_SH/LOCK_EX) without waiting, or None if someone holds it."""
    f = open(path, "ab")  # noqa: SIM115 - the caller keeps it open as long as it holds the lock
    try:
        fcntl.flock(f.fileno(), mode | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


@contextlib.contextmanager
def exclusive(path: str) -> Iterator[BinaryIO | None]:
    """An exclusive lock on path if free now (else None), released on exit."""
    f = try_lock(path, fcntl.LOCK_EX)
    try:
        yield f
    finally:
        if f is not None:
            f.close()


def touch(path: str) -> None:
    """Set path's mtime to now (creating it)."""
    with open(path, "ab"):
        pass
    os.utime(path, None)


def write_json(path: str, data: dict[str, Any]) -> None:
    """Atomically replace path with data, readable by the owner only (it holds the server's token)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def idle_timeout(directory: str, default: float) -> float:
    try:
        with open(os.path.join(directory, IDLE_TIMEOUT)) as f:
            return float(f.read().strip())
    except (OSError, ValueError):
        return default


def note(message: str) -> None:
    """A line in server.log (stdout is that file)."""
    print(f"{time.strftime('%y/%m/%d %H:%M:%S')} dbt-ducklake supervisor: {message}", flush=True)


class Supervisor:
    def __init__(self, launch: dict[str, Any]) -> None:
        self.launch = launch
        self.dir: str = launch["dir"]
        self.server: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.token: str = launch.get("token") or ""

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def start(self) -> int | None:
        """Start the server; its port once it listens, None if it exited or did not listen in time (a driver's
        gateway secret is then in self.token)."""
        log_path = self.path(LOG)
        offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        env = {**os.environ, **self.launch["env"]}
        driver = self.launch.get("kind") == "driver"
        if driver:
            env["_PYSPARK_DRIVER_CONN_INFO_PATH"] = self.path(GATEWAY_INFO)
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path(GATEWAY_INFO))
        # a driver's stdin is a pipe held open for its lifetime: PySpark's gateway exits at EOF (no orphan JVM)
        self.server = subprocess.Popen(self.launch["command"], stdin=subprocess.PIPE if driver else subprocess.DEVNULL,
                                       stdout=sys.stdout, stderr=subprocess.STDOUT, env=env, cwd=self.dir)
        note(f"started the Spark {'driver' if driver else 'Connect server'}, pid {self.server.pid}")
        deadline = time.monotonic() + float(self.launch["ready_timeout"])
        while not self.stopping and time.monotonic() < deadline and self.server.poll() is None:
            if driver:
                found = self._read_gateway_info()
                if found is not None:
                    return found
            else:
                with open(log_path, "rb") as f:
                    f.seek(offset)
                    started = STARTED.search(f.read())
                if started:  # the port actually bound (Spark moves on to the next one if the given one was taken)
                    return int(started.group(1))
            time.sleep(0.1)
        return None

    def _read_gateway_info(self) -> int | None:
        """The driver's gateway port (its secret into self.token) once it wrote gateway.info, else None."""
        path = self.path(GATEWAY_INFO)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        if len(data) < 8:
            return None
        port, size = struct.unpack(">ii", data[:8])
        if len(data) < 8 + size:
            return None  # PySpark's gateway writes a temporary file and renames it: this is not expected, but cheap
        self.token = data[8:8 + size].decode()
        os.remove(path)  # the secret lives on in server.json only (owner-readable)
        return port

    def stop_server(self, why: str) -> None:
        server = self.server
        if server is None or server.poll() is not None:
            return
        note(f"stopping the server (pid {server.pid}): {why}")
        if server.stdin is not None:
            with contextlib.suppress(OSError):
                server.stdin.close()  # a driver's gateway exits at EOF, running Spark's shutdown hooks
        server.terminate()
        try:
            server.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    def forget(self) -> None:
        """Remove server.json if it still describes this supervisor's server."""
        info = read_json(self.path(SERVER))
        if info is not None and self.server is not None and info.get("pid") == self.server.pid:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path(SERVER))

    def watch(self, poll: float) -> None:
        """Until the server exits or stays unused longer than the idle timeout (no client holds use.lock)."""
        assert self.server is not None
        last_busy = time.time()
        default_idle = float(self.launch["idle_timeout"])
        while not self.stopping:
            if not os.path.exists(self.path(LAUNCH)):
                note("the server's directory was removed")
                return
            if self.server.poll() is not None:
                note(f"the server exited with code {self.server.returncode}")
                self.forget()
                return
            with exclusive(self.path(USE_LOCK)) as free:
                if free is None:
                    last_busy = time.time()
            try:
                last_used = max(last_busy, os.path.getmtime(self.path(LAST_USED)))
            except OSError:
                last_used = last_busy
            timeout = idle_timeout(self.dir, default_idle)
            if time.time() - last_used > timeout:
                # both locks: no client is attaching (start.lock) and none is attached (use.lock) while it stops
                with exclusive(self.path(START_LOCK)) as starting, exclusive(self.path(USE_LOCK)) as unused:
                    if starting is not None and unused is not None:
                        self.forget()
                        self.stop_server(f"no client for {timeout:g} s")
                        return
            time.sleep(poll)
        with exclusive(self.path(START_LOCK)):  # stopped by a signal: best effort, it may be a client's doing
            self.forget()
        self.stop_server("the supervisor was asked to stop")

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        port = self.start()
        if port is None:
            self.stop_server("it did not start listening")
            note("the server did not start: see the lines above")
            return 1
        assert self.server is not None
        touch(self.path(LAST_USED))
        write_json(self.path(SERVER), {
            "pid": self.server.pid, "supervisor_pid": os.getpid(), "port": port, "token": self.token,
            "started": time.time(), "log": self.path(LOG), "key": self.launch["key"],
            "label": self.launch["label"], "master": self.launch["master"], "kind": self.launch.get("kind", "connect")})
        note(f"the server listens on 127.0.0.1:{port}")
        timeout = float(self.launch["idle_timeout"])
        try:
            self.watch(poll=max(0.2, min(5.0, timeout / 10)))
        finally:  # whatever stops the supervisor (its directory deleted, a bug) stops the server: no orphan JVM
            self.stop_server("the supervisor is stopping")
        return 0

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True


def main(argv: list[str]) -> int:
    launch = read_json(argv[1])
    if launch is None:
        print(f"dbt-ducklake supervisor: cannot read {argv[1]}", file=sys.stderr)
        return 2
    # detach: the first process exits at once (its parent reaps it), the second leads a new session holding the
    # server, so it outlives the dbt process that started it and no zombie of it stays in a long-lived client
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    with open(os.path.join(launch["dir"], SUPERVISOR_PID), "w") as f:
        f.write(str(os.getpid()))
    return Supervisor(launch).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
