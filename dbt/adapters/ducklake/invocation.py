"""The dbt command this process runs, for behaviour that depends on it."""

from __future__ import annotations


def dbt_command() -> str | None:
    """The running dbt command's name (`run`, `debug`, ...), or None outside a dbt invocation."""
    try:
        from dbt.flags import get_flags

        return getattr(get_flags(), "WHICH", None)
    except Exception:  # noqa: BLE001 - outside a dbt invocation
        return None
