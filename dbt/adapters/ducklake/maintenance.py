"""Lake maintenance for dbt run-operations: parse the macro arguments, run the lake operation, log a summary."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from .lake.errors import DuckLakeError
from .lake.maintenance import cleanup as mt
from .lake.maintenance.check import check_files
from .lake.maintenance.checkpoint import STEPS, StepResult, checkpoint
from .lake.option_values import parse_size, parse_threshold
from .runtime import Runtime
from .spark.env.session import is_started

logger = AdapterLogger("DuckLake")


def _timestamp(value: Any, name: str) -> dt.datetime | None:
    """A timestamp argument: None, a datetime, or ISO text ('2026-01-31', '2026-01-31 12:00:00+00')."""
    if value is None or isinstance(value, dt.datetime):
        return value
    try:
        parsed = dt.datetime.fromisoformat(str(value))
    except ValueError as e:
        raise DbtRuntimeError(f"{name}={value!r} is not an ISO timestamp (e.g. '2026-01-31 12:00:00+00:00')") from e
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def _versions(value: Any) -> list[int] | None:
    if value is None:
        return None
    items = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    try:
        return [int(v) for v in items]
    except (TypeError, ValueError) as e:
        raise DbtRuntimeError(f"versions={value!r} must be a list of snapshot ids") from e


def _size(value: Any, name: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as e:
        raise DbtRuntimeError(f"{name}={value!r}: {e}") from e


def _count(value: Any, name: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError) as e:
        raise DbtRuntimeError(f"{name}={value!r} must be a whole number") from e


def _threshold(value: Any) -> float | None:
    try:
        return parse_threshold(value)
    except ValueError as e:
        raise DbtRuntimeError(str(e)) from e


def _checkpoint(rt: Runtime, kw: dict[str, Any]) -> str:
    """Each step is logged as it finishes: a failing step's predecessors (committed) are reported too."""
    done: list[StepResult] = []

    def report(step: StepResult) -> None:
        done.append(step)
        logger.info(f"ducklake_checkpoint: {step.step}: {step.summary()}")

    try:
        checkpoint(rt.lake, force_orphans=bool(kw.get("force")), report=report)
    except (ValueError, DuckLakeError) as e:
        steps = [s.step for s in done]
        failed = next(s for s in STEPS if s not in steps)
        raise DbtRuntimeError(f"ducklake_checkpoint: {failed} failed ({e}); the steps before it are done"
                              f"{': ' + ', '.join(steps) if steps else ' (none)'}") from e
    return "; ".join(f"{s.step}: {s.summary()}" for s in done)


def _either(kw: dict[str, Any], ours: str, theirs: str) -> Any:
    """An argument under our name or DuckDB's (cleanup_all, table_name, schema_name); both given must agree."""
    a, b = kw.get(ours), kw.get(theirs)
    if a is not None and b is not None and a != b:
        raise DbtRuntimeError(f"{ours}={a!r} and {theirs}={b!r} disagree: give one of them")
    return a if a is not None else b


def _expire(rt: Runtime, kw: dict[str, Any]) -> str:
    versions = _versions(kw.get("versions"))
    dry = bool(kw.get("dry_run"))
    got = mt.expire_snapshots(rt.lake, versions, _timestamp(kw.get("older_than"), "older_than"), dry)
    ids = [s.snapshot_id for s in got]
    summary = f"{'would expire' if dry else 'expired'} snapshots {ids}"
    skipped = sorted(set(versions or ()) - set(ids))
    if skipped:  # DuckDB skips them silently; say so
        summary += f"; skipped {skipped} (no such snapshot, or the latest, which is never expired)"
    return summary


SHOWN_PROBLEMS = 20  # damaged files listed in the error (beyond that, every one is logged)


def check(rt: Runtime, **kw: Any) -> str:
    """ducklake_check_files: the files the catalog lists, for every snapshot it holds, that are missing, of another
    size or (footers=true) unreadable; returns the summary when there are none.

    Raises:
        DbtRuntimeError: a file is missing or damaged (the run-operation fails, listing them), or bad arguments.
    """
    footers = bool(_either(kw, "footers", "read_footers"))
    try:
        got = check_files(rt.lake, _either(kw, "schema", "schema_name"), _either(kw, "table", "table_name"),
                          footers=footers)
    except (ValueError, DuckLakeError) as e:
        raise DbtRuntimeError(f"ducklake_check_files: {e}") from e
    what = (f"{got.checked} files ({got.data_files} data, {got.delete_files} delete files) of every snapshot the "
            "catalog holds")
    if not got.problems:
        summary = f"ducklake_check_files: {what}: all present with their catalog sizes" + (
            ", footers readable" if footers else "")
        logger.info(summary)
        return summary
    shown = [str(p) for p in got.problems[:SHOWN_PROBLEMS]]
    if len(got.problems) > SHOWN_PROBLEMS:  # the error shows the first ones: every one is logged
        for p in got.problems:
            logger.warning(f"ducklake_check_files: {p}")
        shown.append(f"... and {len(got.problems) - SHOWN_PROBLEMS} more (each one is logged above)")
    raise DbtRuntimeError(
        f"ducklake_check_files: {len(got.problems)} of {what} are missing or damaged:\n" + "\n".join(shown) +
        "\nRestore them from a backup (to the same paths), or rebuild their tables from their sources; reads of "
        "those tables fail until then (at the snapshots listed)")


def run(rt: Runtime, op: str, **kw: Any) -> Any:
    """Run one maintenance operation on the runtime's lake, refresh the Spark views, return a printable summary.

    Raises:
        DbtRuntimeError: bad arguments or the lake refused the operation (nothing changed).
    """
    lake = rt.lake
    if op == "check_files":
        return check(rt, **kw)  # reads only: no view to refresh
    try:
        if op == "expire_snapshots":
            summary = _expire(rt, kw)
        elif op in ("cleanup_old_files", "delete_orphaned_files"):
            args = (lake, _timestamp(kw.get("older_than"), "older_than"), bool(_either(kw, "all", "cleanup_all")),
                    bool(kw.get("dry_run")))
            got = (mt.cleanup_old_files(*args) if op == "cleanup_old_files"
                   else mt.delete_orphaned_files(*args, force=bool(kw.get("force"))))
            summary = f"{'would delete' if kw.get('dry_run') else 'deleted'} {len(got)} files"
        elif op == "merge_adjacent_files":
            merged = mt.merge_adjacent_files(
                lake, kw.get("schema"), kw.get("table"), _size(kw.get("target_file_size"), "target_file_size"),
                min_file_size=_size(kw.get("min_file_size"), "min_file_size"),
                max_file_size=_size(kw.get("max_file_size"), "max_file_size"),
                max_compacted_files=_count(kw.get("max_compacted_files"), "max_compacted_files"))
            summary = "; ".join(f"{s}.{t}: {n} files merged into {m}" for s, t, n, m in merged) or "nothing to merge"
        elif op == "rewrite_data_files":
            rewritten = mt.rewrite_data_files(lake, _either(kw, "schema", "schema_name"), _either(kw, "table", "table_name"),
                                        _threshold(kw.get("delete_threshold")))
            summary = "; ".join(f"{s}.{t}: {n} files rewritten into {m}" for s, t, n, m in rewritten) or "nothing to rewrite"
        elif op == "checkpoint":
            summary = _checkpoint(rt, kw)
        elif op == "flush_inlined_data":
            flushed = mt.flush_inlined_data(lake, _either(kw, "schema", "schema_name"), _either(kw, "table", "table_name"))
            summary = "; ".join(f"{s}.{t}: {n} rows flushed" for s, t, n in flushed) or "nothing to flush"
        else:
            raise DbtRuntimeError(f"unknown maintenance operation {op!r}")
    except (ValueError, DuckLakeError) as e:
        raise DbtRuntimeError(f"ducklake_{op}: {e}") from e
    if is_started(rt.spark):  # the Spark views must list the files the lake has now; a session not started has none
        rt.names.refresh_all()
    logger.info(f"ducklake_{op}: {summary}")
    return summary
