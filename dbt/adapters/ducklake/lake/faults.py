"""Test-only fault injection at the phases of a commit, driven by environment variables of the process.

DUCKLAKE_TEST_CRASH_AT=<phase> kills the process (SIGKILL) when it reaches the phase; DUCKLAKE_TEST_PAUSE_AT=<phase>
with DUCKLAKE_TEST_PAUSE_FILE=<path> creates that file there and waits until it is removed (so a test can, say,
stop the catalog server at that moment). Phases: spark_write (Spark wrote the files, not yet moved into the table),
files_written (the files are in place, the catalog transaction has not begun), catalog_transaction (inside it, before
COMMIT), after_commit, and merge_source_kept (a MERGE's source is computed and kept on the executors, no pass has
read it yet). Unset, these are no-ops.
"""

from __future__ import annotations

import os
import signal
import time

CRASH_ENV = "DUCKLAKE_TEST_CRASH_AT"
PAUSE_ENV = "DUCKLAKE_TEST_PAUSE_AT"
PAUSE_FILE_ENV = "DUCKLAKE_TEST_PAUSE_FILE"
PAUSE_LIMIT_SECONDS = 300.0


def fault_point(phase: str) -> None:
    """Crash or pause here if a test asked for it (see the module's docstring)."""
    if os.environ.get(CRASH_ENV) == phase:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(PAUSE_ENV) == phase and os.environ.get(PAUSE_FILE_ENV):
        marker = os.environ[PAUSE_FILE_ENV]
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        deadline = time.monotonic() + PAUSE_LIMIT_SECONDS
        while os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
