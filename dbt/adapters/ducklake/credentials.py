"""The `type: ducklake` profile."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus

from dbt.adapters.contracts.connection import Credentials
from dbt_common.exceptions import DbtRuntimeError
from sqlalchemy.engine import make_url

from .invocation import dbt_command
from .lake.catalog.url import CatalogLocation, parse_catalog
from .lake.storage import ObjectStoreConfig

if TYPE_CHECKING:
    from .spark.env.profile_session import SessionSpec

MASTER_PREFIXES = ("local", "spark://", "sc://")
# a warm Spark driver on this machine that successive dbt commands share: local-server, local-server[N]
LOCAL_SERVER = re.compile(r"local-server(?:\[(\*|\d+)\])?")


def auto_master() -> str:
    """`master: auto`: a warm local server for a command typed at a terminal, the embedded driver otherwise.

    Why: on a small project a dbt command's own Spark start is most of its time (measured in bench/tiny_commands.py:
    a `dbt run` of 3 models, embedded 2-4x dbt-duckdb's time, warm within 2x), and someone at a terminal runs many
    commands in a row; a warm server stops by itself when idle (server_idle_timeout). Scripts, schedulers and CI
    (no terminal, or CI set, or DBT_DUCKLAKE_WARM=0) keep the daemon-free embedded driver: each command then cleans up
    after itself and nothing outlives it."""
    if os.environ.get("DBT_DUCKLAKE_WARM", "").lower() in ("0", "false", "no"):
        return "local[*]"
    if os.environ.get("DBT_DUCKLAKE_WARM", "").lower() in ("1", "true", "yes"):
        return "local-server"
    if os.environ.get("CI"):
        return "local[*]"
    try:
        interactive = sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        interactive = False
    return "local-server" if interactive else "local[*]"


@dataclass
class DuckLakeCredentials(Credentials):
    # the catalog: a path to a DuckDB file (relative to where dbt runs), duckdb:///…, sqlite:///…, postgresql://…
    catalog: str = "metadata.ducklake"
    # where Parquet files go: a local folder or any shared file system Spark and the driver both reach
    data_path: str = "data/"
    # Spark: local[*] (embedded), local[N], spark://host:7077 (standalone), sc://host:15002 (Connect),
    # local-server / local-server[N] (a Spark driver JVM on this machine that the adapter starts, and successive
    # dbt commands join through Py4J, until it is unused for server_idle_timeout), or auto (the default):
    # local-server for a command typed at a terminal, local[*] otherwise (see `auto_master`)
    master: str = "auto"
    # the DuckLake spec of a lake the adapter creates: "1.0" (DuckDB 1.5 and 2.0 open it) or "1.1" (DuckDB 2.0's
    # default; DuckDB 1.5 cannot open it). An existing lake keeps its version: it is never migrated.
    ducklake_version: str = "1.0"
    # inserts of at most this many rows are stored in the catalog (inlined) where the lake stores no
    # data_inlining_row_limit, as DuckDB's ATTACH option DATA_INLINING_ROW_LIMIT (0: never; unset: not inlined)
    data_inlining_row_limit: int | None = None
    # seconds without any dbt command using the local server after which it stops (master: local-server)
    server_idle_timeout: float = 1800.0
    # extra Spark settings, e.g. {"spark.driver.memory": "4g"}
    spark_config: dict[str, str] = field(default_factory=dict)
    # the author of the snapshots dbt commits (default: the operating system user)
    author: str | None = None
    # the catalog database's password, kept out of `catalog`, e.g. "{{ env_var('DBT_ENV_SECRET_LAKE_PASSWORD') }}"
    # (dbt scrubs DBT_ENV_SECRET_* values from its logs). Without it and without one in the URL, PostgreSQL's own
    # environment applies (PGPASSWORD, ~/.pgpass). Never shown: `dbt debug` and every message mask it.
    password: str | None = None
    # write-audit-publish: a `dbt build` (run, seed, snapshot) stages every node's changes and publishes them as ONE
    # snapshot at its end, only if no model failed and no error-severity test failed (README "Write-audit-publish")
    write_audit_publish: bool = False
    # S3 (data_path s3://bucket/prefix/): without keys, the AWS default chain applies (environment, ~/.aws, instance
    # profile) for Spark (s3a) and the driver alike. The secret and the session token are masked like `password`.
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None
    s3_session_token: str | None = None
    s3_region: str | None = None
    # host[:port] of an S3-compatible service (MinIO, ...), as DuckDB's ENDPOINT; default: AWS
    s3_endpoint: str | None = None
    # path (https://endpoint/bucket/key, what most S3-compatible services need) or vhost (AWS's default)
    s3_url_style: str | None = None
    s3_use_ssl: bool | None = None  # default: true
    schema: str = "main"  # type: ignore[assignment]
    database: str | None = None  # type: ignore[assignment]

    _ALIASES = {"catalog_url": "catalog", "spark_master": "master"}  # noqa: RUF012 - read by dbt's Credentials

    @classmethod
    def __pre_deserialize__(cls, data: dict[Any, Any]) -> dict[Any, Any]:
        data = super().__pre_deserialize__(data)
        data.setdefault("database", None)
        known = {f.name for f in dataclasses.fields(cls)} | set(cls._ALIASES)
        for key in data:
            if key not in known:
                near = difflib.get_close_matches(str(key), sorted(known - {"database"}), n=1)
                hint = f"; did you mean `{near[0]}`?" if near else f"; valid keys: {', '.join(sorted(known))}"
                raise DbtRuntimeError(f"ducklake profile: unknown key `{key}`{hint}")
        return data

    def __post_init__(self) -> None:
        self.catalog, self.data_path = _resolved(self.catalog), _resolved_dir(self.data_path)
        if self.master == "auto":
            self.master = auto_master()
        if self.database is not None and self.database != self.schema:
            raise DbtRuntimeError(
                f"ducklake profile: `database` ({self.database!r}) must be omitted or equal to `schema` "
                f"({self.schema!r}); a DuckLake has schemas, not databases")
        self.database = None
        if not self.catalog:
            raise DbtRuntimeError("ducklake profile: `catalog` must name a catalog database (a path or a URL)")
        if not self.data_path:
            raise DbtRuntimeError("ducklake profile: `data_path` must name the folder for the Parquet files")
        self.ducklake_version = str(self.ducklake_version)  # YAML reads an unquoted 1.1 as a number
        if self.ducklake_version not in ("1.0", "1.1"):
            raise DbtRuntimeError(f"ducklake profile: `ducklake_version` {self.ducklake_version!r} is not a DuckLake "
                                  "spec this adapter creates; use \"1.0\" or \"1.1\"")
        if self.data_inlining_row_limit is not None and self.data_inlining_row_limit < 0:
            raise DbtRuntimeError(f"ducklake profile: `data_inlining_row_limit` must be a whole number of rows, 0 or "
                                  f"more (0 turns inlining off), not {self.data_inlining_row_limit!r}")
        if not self.master.startswith(MASTER_PREFIXES):
            raise DbtRuntimeError(
                f"ducklake profile: `master` {self.master!r} is not a Spark master this adapter can use; "
                "expected local[*] / local[N], spark://host:port or sc://host:port")
        if self.master.startswith("local-") and not LOCAL_SERVER.fullmatch(self.master):
            raise DbtRuntimeError(f"ducklake profile: `master` {self.master!r} is not valid; expected local-server "
                                  "or local-server[N] (N cores, or *)")
        if not self.server_idle_timeout > 0:
            raise DbtRuntimeError(f"ducklake profile: `server_idle_timeout` must be a number of seconds above 0, "
                                  f"not {self.server_idle_timeout!r}")
        if not isinstance(self.spark_config, dict):
            raise DbtRuntimeError("ducklake profile: `spark_config` must be a mapping of Spark settings to values")
        if self.s3_url_style not in (None, "path", "vhost"):
            raise DbtRuntimeError(f"ducklake profile: `s3_url_style` must be path or vhost, not {self.s3_url_style!r}")
        if bool(self.s3_access_key_id) != bool(self.s3_secret_access_key):
            raise DbtRuntimeError("ducklake profile: `s3_access_key_id` and `s3_secret_access_key` go together "
                                  "(give both, or neither for the AWS default credential chain)")
        if self.data_path.startswith("s3a://"):  # stored as DuckDB writes it: the catalog holds s3:// paths
            self.data_path = "s3://" + self.data_path[len("s3a://"):]

    @property
    def type(self) -> str:
        return "ducklake"

    @property
    def unique_field(self) -> str:
        return self.catalog_display

    def _connection_keys(self) -> tuple[str, ...]:
        keys: tuple[str, ...] = ("catalog", "data_path", "schema", "master", "spark_config", "author")
        if self.data_path.startswith("s3://"):  # the non-secret S3 keys (the key id identifies, it is no secret)
            keys = (*keys, "s3_access_key_id", "s3_region", "s3_endpoint", "s3_url_style", "s3_use_ssl")
        return (*keys, "server_idle_timeout") if self.server_master else keys

    @property
    def server_master(self) -> str | None:
        """The Spark master the local server runs (local[*], local[N]) for `master: local-server`, else None."""
        found = LOCAL_SERVER.fullmatch(self.master)
        return None if found is None else f"local[{found.group(1) or '*'}]"

    def connection_info(self, *, with_aliases: bool = False) -> Iterable[tuple[str, Any]]:
        """What `dbt debug` shows: the catalog with any password masked; the local server's state (if used).

        dbt also reads this for every node's `target` while parsing, and hashes it to decide whether its saved parse
        still holds: the runtime states (the server's pid, the class archive) are only for `dbt debug` (and callers
        outside dbt), so that they neither cost a jar listing per node nor force a full parse when they change."""
        for key, value in super().connection_info(with_aliases=with_aliases):
            if key == "author" and value is None:
                value = f"{os_user()} (the operating system user; set author: to name another)"
            yield key, (self.catalog_display if key in ("catalog", "catalog_url") else value)
        if dbt_command() not in (None, "debug"):
            return
        if self.object_store() is not None:  # Spark reaches S3 through hadoop-aws's s3a: is it there?
            from .spark.env import s3a

            yield "s3_connector", s3a.connector_status({str(k): str(v) for k, v in self.spark_config.items()})[1]
        if self.server_master:
            yield "spark_server", self.server_status()
        elif not self.master.startswith("sc://"):  # a driver JVM starts in the dbt process: with the class archive?
            from .spark.env import class_archive

            conf = {str(k): str(v) for k, v in self.spark_config.items()}
            if self.object_store() is not None:  # the connector's jars change the driver's class path
                from .spark.env import s3a

                conf = {**s3a.connector_conf(conf, self.master), **conf}
            yield "spark_class_archive", class_archive.status(conf)

    def session_spec(self) -> SessionSpec:
        """What starting or joining Spark takes from this profile (spark/env/profile_session)."""
        from .spark.env.profile_session import SessionSpec

        # one warm server per lake: Spark's session catalog, where lake tables get their names, is shared by all its
        # sessions
        scope = json.dumps({"catalog": self.catalog, "data_path": self.data_path, "password": self.password})
        return SessionSpec(master=self.master, spark_config=self.spark_config, object_store=self.object_store(),
                           server_master=self.server_master, server_scope=scope,
                           server_label=f"the lake {self.catalog_display} ({self.data_path})",
                           server_idle_timeout=self.server_idle_timeout)

    def server_status(self) -> str:
        """The local server of this profile, as `dbt debug` shows it before connecting (starts nothing)."""
        from .spark.env import local_server
        from .spark.env.profile_session import server_dir

        directory = server_dir(self.session_spec())
        info = local_server.status(directory)
        if info is None:
            return f"not running (the first command starts it); its log: {directory}/server.log"
        kind = str(info.get("kind", "connect"))
        return (f"running: {local_server.WHAT[kind]} at {local_server.address(kind, int(info['port']))} "
                f"(pid {info['pid']}); its log: {info['log']}")

    def catalog_location(self) -> CatalogLocation:
        """Where the catalog is, with the profile's `password` (if any) in its URL."""
        loc = parse_catalog(self.catalog)
        if self.password and loc.backend == "postgresql" and not loc.url.password:
            return CatalogLocation(loc.backend, loc.url.set(password=self.password))
        return loc

    @property
    def catalog_display(self) -> str:
        """The catalog for messages and logs: any password masked."""
        shown = self.catalog
        if "://" in shown:
            with contextlib.suppress(Exception):  # an unparsable value is shown as given, secrets masked below
                shown = make_url(shown).render_as_string(hide_password=True)
        shown = re.sub(r"(password=)\S+", r"\1***", shown)  # DuckDB's 'ducklake:postgres:… password=…' form
        return self.redact(shown)

    def object_store(self) -> ObjectStoreConfig | None:
        """The S3 settings of the profile when its data path is on S3 (s3:// or s3a://), else None."""
        if not self.data_path.startswith(("s3://", "s3a://")):
            return None
        return ObjectStoreConfig(key_id=self.s3_access_key_id, secret=self.s3_secret_access_key,
                                 session_token=self.s3_session_token, region=self.s3_region, endpoint=self.s3_endpoint,
                                 url_style=self.s3_url_style, use_ssl=self.s3_use_ssl)

    def secrets(self) -> list[str]:
        """The secret strings of this profile (the password, as given and as URLs spell it; the S3 secret key and
        session token)."""
        found = {s for s in (self.password, self.s3_secret_access_key, self.s3_session_token) if s}
        try:
            url_password = parse_catalog(self.catalog).url.password
        except Exception:  # noqa: BLE001 - no parsable URL, no password in it
            url_password = None
        if url_password:
            found.add(str(url_password))
        return sorted({form for s in found for form in (s, quote(s, safe=""), quote_plus(s))}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        """The text with every secret of this profile replaced by ****."""
        for secret in self.secrets():
            text = text.replace(secret, "****")
        return text


def project_dir() -> str:
    """Where relative paths of the profile point: the dbt project's directory (--project-dir, else the current one),
    as paths in dbt_project.yml do, so that a command run from elsewhere reaches the same lake."""
    try:
        from dbt.flags import get_flags

        given = getattr(get_flags(), "PROJECT_DIR", None)
    except Exception:  # noqa: BLE001 - outside a dbt invocation: the current directory
        given = None
    return os.path.abspath(os.path.expanduser(str(given))) if given else os.getcwd()


def _resolved(catalog: str) -> str:
    """A file catalog's relative path made absolute against the project directory (URLs of servers unchanged)."""
    if not catalog or catalog.startswith("ducklake:"):
        return catalog
    for prefix in ("duckdb:///", "sqlite:///"):
        if catalog.startswith(prefix):
            rest = catalog[len(prefix):]
            return catalog if rest.startswith("/") or not rest else prefix + os.path.join(project_dir(), rest)
    if "://" in catalog:
        return catalog
    path = os.path.expanduser(catalog)
    return path if os.path.isabs(path) else os.path.join(project_dir(), path)


def _resolved_dir(path: str) -> str:
    """A local data path made absolute against the project directory, keeping its trailing slash."""
    if not path or "://" in path:
        return path
    full = os.path.expanduser(path)
    full = full if os.path.isabs(full) else os.path.join(project_dir(), full)
    return full.rstrip("/") + "/" if path.endswith("/") else full


def os_user() -> str:
    """The operating system user, who authors the snapshots when the profile names nobody."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in some containers
        return "dbt"
