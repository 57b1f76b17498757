"""gc_freeze: one freeze per command, undone by thaw. Run in a process of its own: the collector's state is the
process's, and other tests' threads may freeze too."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import gc, json
from dbt.adapters.ducklake import gc_freeze

gc.unfreeze()
out = {"start": gc.get_freeze_count()}
kept = [object() for _ in range(10)]
gc_freeze.freeze()
out["first"] = gc.get_freeze_count()
more = [[i] for i in range(1000)]  # made after the freeze: a second call in the same command leaves them
gc_freeze.freeze()
out["second"] = gc.get_freeze_count()
gc_freeze.thaw()
out["thawed"] = gc.get_freeze_count()
gc_freeze.thaw()
out["thawed_twice"] = gc.get_freeze_count()
gc_freeze.freeze()  # the next command freezes again, the objects made since too
out["next"] = gc.get_freeze_count()
print(json.dumps(out))
"""


def test_freeze_once_per_command_and_thaw() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(proc.stdout)
    assert got["start"] == 0
    assert got["first"] > 0
    assert got["second"] == got["first"]
    assert got["thawed"] == 0 and got["thawed_twice"] == 0
    assert got["next"] >= got["first"] + 1000


PLUGIN = """
import gc, json
before = gc.isenabled()
from dbt.adapters.ducklake import Plugin
print(json.dumps({"before": before, "after": gc.isenabled(), "frozen": gc.get_freeze_count(),
                  "adapter": Plugin.adapter.type()}))
"""


def test_the_plugin_loads_with_the_collector_back_on_and_its_modules_frozen() -> None:
    proc = subprocess.run([sys.executable, "-c", PLUGIN], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(proc.stdout)
    assert got["adapter"] == "ducklake"
    assert got["before"] is True and got["after"] is True  # paused for the imports only
    assert got["frozen"] > 100_000  # dbt's and the adapter's modules
