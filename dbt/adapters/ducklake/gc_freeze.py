"""The objects a dbt command keeps to its end (modules, the parsed manifest) kept out of Python's full collections.

A full (oldest generation) collection walks every tracked object of the process. The adapter's imports (Spark,
Arrow, the catalog drivers, SQL parsing) and dbt's manifest make that about 270k objects in the loop project, so each
full collection took 100-220 ms, and a phase set off three to four of them after the imports (measured with
`gc.callbacks`). Those objects live until dbt returns, so walking them frees nothing. `gc.freeze()` moves every
object tracked so far to a permanent generation that collections skip; new objects are collected as before.

Two freezes: after the plugin's imports (`freeze_imports`: dbt's and the adapter's modules) and at the first
connection of a graph command (`freeze`: the manifest is parsed by then). Both are undone when a graph command ends
(`thaw`), so a process that runs many dbt commands (dbtRunner) lets go of one command's garbage once it is done:
objects frozen while garbage are freed then, not lost.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_frozen = False  # whether this command froze the objects it started with (undone by thaw)


def freeze() -> None:
    """Freeze the objects tracked now (once per command: later calls until `thaw` do nothing)."""
    global _frozen
    with _lock:
        if not _frozen:
            gc.freeze()
            _frozen = True


def thaw() -> None:
    """The frozen objects back in the oldest generation, collectable again (the command's end)."""
    global _frozen
    with _lock:
        if _frozen:
            gc.unfreeze()
            _frozen = False


def freeze_imports() -> None:
    """After the adapter's imports (once per process): freeze what the process holds now."""
    gc.freeze()
