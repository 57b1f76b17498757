"""For tests of the warm local server: a root for server directories whose servers are stopped at the end, and a
bounded wait."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dbt.adapters.ducklake.spark.env import local_server


@contextmanager
def servers_root(tmp_path: Path) -> Iterator[str]:
    """tmp_path/servers; every server started under it is stopped on exit, failure or not (its logs are kept)."""
    root = str(tmp_path / "servers")
    try:
        yield root
    finally:
        local_server.stop_all(root)


def wait_for(what: str, check: Callable[[], object], timeout: float, poll: float = 0.2) -> None:
    """Return once check() is true.

    Raises:
        AssertionError: still false after timeout seconds.
    """
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll)
