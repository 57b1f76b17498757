"""A throwaway PostgreSQL server for the test session, and fresh databases on it.

`start()` either starts a private server (initdb into a temp dir, trust auth, 127.0.0.1 on a free port, unix socket in
the temp dir, fsync off) or, when DUCKLAKE_TEST_PG_URL is set (e.g. postgresql://postgres@127.0.0.1:5432/postgres),
uses that server instead. `PostgresServer.create_database(name)` makes an empty database and returns its URL.

initdb and postgres refuse to run as root; as root they run as the `postgres` OS user (runuser -u postgres -- …).
If no server binaries are found the session fails with a message saying what to install: it never skips.
"""

from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

ENV_URL = "DUCKLAKE_TEST_PG_URL"
ENV_BINDIR = "DUCKLAKE_TEST_PG_BINDIR"
_SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
_START_ATTEMPTS = 3
# Speed over durability: the cluster is deleted at the end of the session.
_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "log_min_messages": "warning",
}


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started or reached for the tests."""


def find_bindir() -> str:
    """The directory holding initdb, pg_ctl and postgres.

    Looked up in order: $DUCKLAKE_TEST_PG_BINDIR, `pg_config --bindir` (on Debian it may name the client-only
    directory, so it must actually hold the server binaries), /usr/lib/postgresql/<newest version>/bin, then PATH.

    Raises:
        PostgresUnavailable: no directory holds the server binaries.
    """
    candidates: list[str] = []
    if os.environ.get(ENV_BINDIR):
        candidates.append(os.environ[ENV_BINDIR])
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=False)
            if out.returncode == 0 and out.stdout.strip():
                candidates.append(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    for path in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True):
        candidates.append(path)
    postgres_on_path = shutil.which("postgres")
    if postgres_on_path:
        candidates.append(os.path.dirname(os.path.realpath(postgres_on_path)))
    for bindir in candidates:
        if all(os.access(os.path.join(bindir, b), os.X_OK) for b in _SERVER_BINARIES):
            return bindir
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found "
        f"(looked in: {', '.join(candidates) or 'nothing found via pg_config, /usr/lib/postgresql/*/bin or PATH'}). "
        "The PostgreSQL catalog tests start their own server: install Debian's `postgresql` package "
        "(apt-get install -y postgresql), set DUCKLAKE_TEST_PG_BINDIR to a directory holding them, "
        f"or set {ENV_URL}=postgresql://user@host:port/db to use a running server."
    )


def _version_key(path: str) -> tuple[int, ...]:
    ver = path.split(os.sep)[-2]
    return tuple(int(p) for p in re.findall(r"\d+", ver)) or (0,)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    """A PostgreSQL server reachable over TCP with a superuser; `owned` servers are stopped and deleted by `stop()`."""

    host: str
    port: int
    user: str
    password: str | None = None
    admin_db: str = "postgres"
    drivername: str = "postgresql"
    owned: bool = False
    root_dir: str | None = None  # temp dir with data/, the socket and the log (owned servers only)
    bindir: str | None = None
    _run_as: list[str] = field(default_factory=list)
    _created: list[str] = field(default_factory=list)
    _stopped: bool = False

    @property
    def url(self) -> str:
        """URL of the admin database."""
        return self.database_url(self.admin_db)

    def database_url(self, name: str) -> str:
        """'postgresql://user@host:port/<name>' (password included when there is one)."""
        from sqlalchemy.engine import URL

        url = URL.create(self.drivername, username=self.user, password=self.password, host=self.host,
                         port=self.port, database=name)
        return url.render_as_string(hide_password=False)

    def connect(self, dbname: str | None = None, **kw: object):  # -> psycopg.Connection
        """A psycopg 3 connection (autocommit) to `dbname` (default: the admin database)."""
        import psycopg

        return psycopg.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                               dbname=dbname or self.admin_db, autocommit=True, connect_timeout=10, **kw)

    def create_database(self, name: str) -> str:
        """CREATE DATABASE `name` (it must not exist) and return its URL."""
        from psycopg import sql

        if not name or len(name.encode()) > 63:
            raise ValueError(f"bad database name {name!r}: must be 1..63 bytes")
        with self.connect() as con:
            con.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self._created.append(name)
        return self.database_url(name)

    def add_password_user(self, name: str, password: str) -> bool:
        """A superuser role `name` that logs in with `password`. On an owned server the role must authenticate with
        scram-sha-256 over TCP (a rule put first in pg_hba.conf, then reloaded); returns whether that is enforced
        (a borrowed server keeps its own rules)."""
        from psycopg import sql

        with self.connect() as con:
            exists = con.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
            con.execute(sql.SQL("{} ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
                sql.SQL("ALTER" if exists else "CREATE"), sql.Identifier(name), sql.Literal(password)))
            if not self.owned or self.root_dir is None:
                return False
            hba = os.path.join(self.root_dir, "data", "pg_hba.conf")
            with open(hba) as f:
                rules = f.read()
            rule = f"host all {name} 127.0.0.1/32 scram-sha-256\n"
            if rule not in rules:
                with open(hba, "w") as f:
                    f.write(rule + rules)
            con.execute("SELECT pg_reload_conf()")
        return True

    def halt(self) -> None:
        """Stop an owned server's process, keeping its data (`resume` starts it again on the same port)."""
        assert self.owned and self.root_dir is not None and self.bindir is not None
        _run([*self._run_as, os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.root_dir, "data"), "-m",
              "fast", "-w", "stop"], cwd=self.root_dir, what="pg_ctl stop")

    def resume(self) -> None:
        """Start a halted owned server again."""
        assert self.owned and self.root_dir is not None and self.bindir is not None
        _run([*self._run_as, os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.root_dir, "data"), "-l",
              os.path.join(self.root_dir, "server.log"), "-w", "-t", "60", "start"], cwd=self.root_dir,
             what="pg_ctl start")
        _wait_ready(self)

    def stop(self) -> None:
        """Stop and delete an owned server; on a borrowed server drop the databases this session created."""
        if self._stopped:
            return
        self._stopped = True
        if not self.owned:
            self._drop_created()
            return
        assert self.root_dir is not None and self.bindir is not None
        data = os.path.join(self.root_dir, "data")
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            subprocess.run(
                [*self._run_as, os.path.join(self.bindir, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"],
                cwd=self.root_dir, env=_clean_env(), capture_output=True, text=True, timeout=60, check=False,
            )
        shutil.rmtree(self.root_dir, ignore_errors=True)

    def _drop_created(self) -> None:
        from psycopg import sql

        if not self._created:
            return
        try:
            with self.connect() as con:
                for name in self._created:
                    con.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        except Exception:  # best effort: leftovers on a borrowed server are harmless
            pass


def start() -> PostgresServer:
    """The server for this test session: the one named by $DUCKLAKE_TEST_PG_URL, else a new private one.

    Raises:
        PostgresUnavailable: with a message saying what is missing.
    """
    if os.environ.get(ENV_URL):
        return _borrow(os.environ[ENV_URL])
    return _start_private()


def _borrow(value: str) -> PostgresServer:
    from sqlalchemy.engine import make_url

    try:
        url = make_url(value)
    except Exception as e:
        raise PostgresUnavailable(f"{ENV_URL}={value!r} is not a URL like postgresql://user@host:port/db: {e}") from e
    server = PostgresServer(host=url.host or "127.0.0.1", port=url.port or 5432, user=url.username or "postgres",
                            password=url.password, admin_db=url.database or "postgres",
                            drivername=url.drivername, owned=False)
    try:
        with server.connect() as con:
            con.execute("SELECT 1")
    except Exception as e:
        raise PostgresUnavailable(f"cannot connect to {ENV_URL}={url.render_as_string(hide_password=True)}: {e}") from e
    atexit.register(server.stop)
    return server


def _clean_env() -> dict[str, str]:
    """The environment without PG* variables (PGPORT, PGDATA, … would redirect initdb/pg_ctl)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    return env


def run_as_prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    import pwd

    try:
        pwd.getpwnam("postgres")
    except KeyError as e:
        raise PostgresUnavailable(
            "running as root, and initdb/postgres refuse root, but there is no `postgres` OS user to run them as: "
            "install Debian's `postgresql` package (it creates the user) or run the tests as a normal user"
        ) from e
    runuser = shutil.which("runuser") or next(
        (p for p in ("/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser") if os.access(p, os.X_OK)), None
    )
    if runuser is None:
        raise PostgresUnavailable(
            "running as root but `runuser` (util-linux) is missing: cannot start PostgreSQL as `postgres`"
        )
    return [runuser, "-u", "postgres", "--"]


def _base_tmp() -> str | None:
    # As root, $TMPDIR may be unreadable for the postgres user; /tmp is world-traversable.
    # The unix socket path must also stay short (about 107 bytes).
    base = tempfile.gettempdir()
    if (os.geteuid() == 0 or len(base) > 60) and os.path.isdir("/tmp"):
        return "/tmp"
    return None


def start_private() -> PostgresServer:
    """A new private server of the test's own (to stop and restart), whatever $DUCKLAKE_TEST_PG_URL says."""
    return _start_private()


def _start_private() -> PostgresServer:
    bindir = find_bindir()
    run_as = run_as_prefix()
    root = tempfile.mkdtemp(prefix="ducklake-pg-", dir=_base_tmp())
    server = PostgresServer(host="127.0.0.1", port=0, user="postgres", owned=True, root_dir=root, bindir=bindir,
                            _run_as=run_as)
    atexit.register(server.stop)
    try:
        if run_as:
            os.chmod(root, 0o700)
            shutil.chown(root, user="postgres", group=None)
        data = os.path.join(root, "data")
        _run([*run_as, os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
              "-E", "UTF8", "--no-locale", "--no-sync"], cwd=root, what="initdb")
        with open(os.path.join(data, "postgresql.conf"), "a") as f:
            f.write("\ninclude 'ducklake_test.conf'\n")
        log = os.path.join(root, "server.log")
        last_error = ""
        for _ in range(_START_ATTEMPTS):
            port = _free_port()
            conf = dict(_SETTINGS, port=str(port), unix_socket_directories=f"'{root}'")
            conf_path = os.path.join(data, "ducklake_test.conf")
            with open(conf_path, "w") as f:
                f.writelines(f"{k} = {v}\n" for k, v in conf.items())
            if run_as:
                shutil.chown(conf_path, user="postgres", group=None)
            proc = subprocess.run(
                [*run_as, os.path.join(bindir, "pg_ctl"), "-D", data, "-l", log, "-w", "-t", "60", "start"],
                cwd=root, env=_clean_env(), capture_output=True, text=True, timeout=120, check=False,
            )
            if proc.returncode == 0:
                server.port = port
                _wait_ready(server)
                return server
            # Most likely the free port was taken meanwhile: make sure nothing runs, then try another.
            last_error = proc.stdout + proc.stderr + _tail(log)
            subprocess.run([*run_as, os.path.join(bindir, "pg_ctl"), "-D", data, "-m", "immediate", "stop"],
                           cwd=root, env=_clean_env(), capture_output=True, timeout=60, check=False)
        raise PostgresUnavailable(f"PostgreSQL did not start after {_START_ATTEMPTS} attempts:\n{last_error}")
    except BaseException:
        server.stop()
        raise


def _run(cmd: list[str], cwd: str, what: str) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise PostgresUnavailable(
            f"{what} failed ({' '.join(cmd)}), exit {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def _wait_ready(server: PostgresServer, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with server.connect() as con:
                con.execute("SELECT 1")
            return
        except Exception as e:
            if time.monotonic() > deadline:
                raise PostgresUnavailable(
                    f"PostgreSQL started but does not accept connections on port {server.port}: {e}"
                ) from e
            time.sleep(0.1)
