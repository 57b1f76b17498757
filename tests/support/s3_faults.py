"""A fault-injecting HTTP proxy in front of the tests' S3 server (moto), on 127.0.0.1 only.

Clients (Spark's s3a, pyarrow, DuckDB) address the proxy as their S3 endpoint; it forwards each request byte for byte
to the server with the same Host header (SigV4 signs the Host header, so the client's signature stays valid for the
host it addressed) and relays the answer, unless a rule of the test matches it. Rules say which requests (method, a
regular expression on the path `/bucket/key`, a query parameter, an access key id) get which fault, after how many
matching requests passed, and how many times:

- "slowdown": 503 SlowDown with S3's XML error body (what S3 answers when throttling);
- "error": 500 InternalError;
- "reset": half of the request's body is read, then the connection is reset without an answer (a network failure
  mid-upload);
- "forbidden": 403 InvalidAccessKeyId (the server's own check of keys: moto accepts any pair).

The proxy runs in threads of the test process, so a test changes its rules between the dbt commands it starts.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.support.s3 import S3Server

# per-connection headers, not forwarded (the proxy's own connection to the server has its own); Expect: the proxy
# answered 100-continue itself and forwards a complete body
_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "expect"}
_ERRORS = {
    "slowdown": (503, "SlowDown", "Please reduce your request rate."),
    "error": (500, "InternalError", "We encountered an internal error. Please try again."),
    "forbidden": (403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."),
}
_KEY_ID = re.compile(r"Credential=([^/,\s]+)/")


@dataclass
class Rule:
    """Which requests get a fault, and which one: matching requests pass `skip` times, then get the fault `times`
    times (None: from then on, until the rule is removed).

    With `after`, the rule is armed by other requests: PUTs whose path matches `after` pass `skip` times, and from
    then on the requests the rule matches get the fault (say, every write under a table once two of its files were
    written: a network lost mid-write)."""

    action: str  # slowdown, error, reset or forbidden
    methods: frozenset[str] = frozenset()  # empty: any method
    path: str = ""  # a regular expression searched in the unquoted path (/bucket/key); empty: any
    query: str | None = None  # a query parameter the request must have (uploadId, partNumber, delete, ...)
    key_id: str | None = None  # the access key id of the request's signature
    skip: int = 0
    times: int | None = 1
    after: str | None = None
    seen: int = 0  # matching requests so far (with `after`: PUTs matching it)
    faulted: int = 0  # faults given

    def __post_init__(self) -> None:
        if self.action not in (*_ERRORS, "reset"):
            raise ValueError(f"unknown fault {self.action!r}")

    def matches(self, method: str, path: str, query: dict[str, list[str]], key_id: str | None) -> bool:
        return ((not self.methods or method in self.methods) and (not self.path or re.search(self.path, path) is not None)
                and (self.query is None or self.query in query) and (self.key_id is None or self.key_id == key_id))

    def take(self, method: str, path: str, query: dict[str, list[str]], key_id: str | None) -> bool:
        """Count a request; whether it gets the fault."""
        if self.after is not None:
            if self.seen < self.skip:
                self.seen += method == "PUT" and re.search(self.after, path) is not None
                return False
        elif self.matches(method, path, query, key_id):
            self.seen += 1
            if self.seen <= self.skip:
                return False
        if not self.matches(method, path, query, key_id) or (self.times is not None and self.faulted >= self.times):
            return False
        self.faulted += 1
        return True


@dataclass(frozen=True)
class Request:
    """A request the proxy saw: method, path (/bucket/key, unquoted), query, and the fault it got (or None)."""

    method: str
    path: str
    query: str
    fault: str | None


@dataclass
class FaultProxy:
    """A running proxy: `server` is what clients use (its endpoint is the proxy's), `upstream` the real server."""

    upstream: S3Server
    server: S3Server = field(init=False)  # set once the proxy's port is known
    rules: list[Rule] = field(default_factory=list)
    log: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, action: str, **kw: object) -> Rule:
        """A new rule (see Rule); returned, so a test can read its counts."""
        rule = Rule(action, **{k: frozenset(v) if k == "methods" else v for k, v in kw.items()})  # type: ignore[arg-type]
        with self.lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """No more faults (the log stays)."""
        with self.lock:
            self.rules.clear()

    def faults(self, action: str | None = None) -> list[Request]:
        """The requests that got a fault (of that kind)."""
        with self.lock:
            return [r for r in self.log if r.fault is not None and (action is None or r.fault == action)]

    def _decide(self, method: str, path: str, query: str, key_id: str | None) -> str | None:
        parsed = parse_qs(query, keep_blank_values=True)
        with self.lock:
            fault = next((r.action for r in self.rules if r.take(method, path, parsed, key_id)), None)
            self.log.append(Request(method, path, query, fault))
        return fault


def _error_body(code: str, message: str, resource: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<Resource>{resource}</Resource><RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId></Error>").encode()


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    host, port = proxy.upstream.endpoint.rsplit(":", 1)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: S3 clients pool their connections

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            """Quiet: the proxy's log is `FaultProxy.log`."""

        def _read_body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                raw = bytearray()  # forwarded as it came, framing included (the header is forwarded too)
                while True:
                    size_line = self.rfile.readline()
                    raw += size_line
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                    chunk = self.rfile.read(size + 2)
                    raw += chunk
                    if size == 0:
                        while chunk not in (b"\r\n", b"\n", b""):  # trailers, then the empty line
                            chunk = self.rfile.readline()
                            raw += chunk
                        return bytes(raw)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _handle(self) -> None:
            url = urlsplit(self.path)
            key_id = _KEY_ID.search(self.headers.get("Authorization", ""))
            fault = proxy._decide(self.command, url.path, url.query, key_id.group(1) if key_id else None)
            if fault == "reset":
                self.close_connection = True
                # half of the body arrives, then the connection is gone (mid-upload)
                self.rfile.read(int(self.headers.get("Content-Length") or 0) // 2)
                # an abortive close (RST), as a dropped network connection looks to the client
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                return
            body = self._read_body()
            if fault is not None:
                status, code, message = _ERRORS[fault]
                payload = _error_body(code, message, url.path)
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for k, v in headers.items():
                    conn.putheader(k, v)
                conn.endheaders(body if body else None)
                answer = conn.getresponse()
                payload = answer.read()
            finally:
                conn.close()
            self.send_response_only(answer.status, answer.reason)
            for k, v in answer.getheaders():
                if k.lower() not in _HOP and k.lower() not in ("transfer-encoding", "content-length"):
                    self.send_header(k, v)
            # a HEAD answer's length is the object's; others: the body relayed here
            length = answer.getheader("Content-Length") if self.command == "HEAD" else str(len(payload))
            self.send_header("Content-Length", length or "0")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815 - the base class's dispatch names

    return Handler


@contextmanager
def fault_proxy(upstream: S3Server) -> Iterator[FaultProxy]:
    """A proxy in front of the server on 127.0.0.1 at a free port, stopped on exit."""
    proxy = FaultProxy(upstream)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), _handler(proxy))
    proxy.server = S3Server(f"127.0.0.1:{httpd.server_address[1]}", upstream.key_id, upstream.secret, upstream.region)
    thread = threading.Thread(target=httpd.serve_forever, name="s3-fault-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)
