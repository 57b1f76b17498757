"""Where the adapter keeps what it caches on this machine (class archives, warm-server directories)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """$XDG_CACHE_HOME/dbt-ducklake, else ~/.cache/dbt-ducklake (the XDG base directory rule)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dbt-ducklake"
