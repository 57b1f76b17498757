"""checkpoint: the lake's upkeep in the order of DuckDB's CHECKPOINT on a DuckLake catalog, each step with the
lake's own settings (its options, else DuckDB's defaults), as `CALL ducklake_<step>('lake')` runs them.

DuckDB's order (DuckLakeTransactionManager::Checkpoint): inlined data is flushed first (it can make many files to
compact), snapshots are expired next (that can make files compactable), then the two compactions, and the file
deletions last, since they mostly delete what compaction and expiry left. Each step commits on its own, as in DuckDB:
a step that fails stops the checkpoint, the steps before it stay done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import cleanup as mt

if TYPE_CHECKING:
    from .maintained_lake import MaintainedLake

SHOWN_IDS = 10  # expired snapshot ids a summary lists; beyond that, the first and the last
STEPS = ("flush_inlined_data", "expire_snapshots", "merge_adjacent_files", "rewrite_data_files", "cleanup_old_files",
         "delete_orphaned_files")


@dataclass(frozen=True)
class StepResult:
    """What one step did: its name and the step function's result (see each function for its shape)."""

    step: str
    result: Any

    def summary(self) -> str:
        r = self.result
        if self.step == "flush_inlined_data":
            return f"{sum(n for _, _, n in r)} inlined rows flushed" + _tables(r)
        if self.step == "expire_snapshots":
            ids = [s.snapshot_id for s in r]
            shown = ", ".join(map(str, ids)) if len(ids) <= SHOWN_IDS else f"{ids[0]} to {ids[-1]}"
            return f"{len(r)} snapshots expired" + (f" ({shown})" if r else "")
        if self.step in ("merge_adjacent_files", "rewrite_data_files"):
            verb = "merged" if self.step == "merge_adjacent_files" else "rewritten"
            return f"{sum(n for *_, n, _ in r)} files {verb} into {sum(m for *_, m in r)}" + _tables(r)
        return f"{len(r)} files deleted"


def _tables(rows: list[tuple[Any, ...]]) -> str:
    return f" in {', '.join(f'{r[0]}.{r[1]}' for r in rows)}" if rows else ""


def checkpoint(lake: MaintainedLake, *, force_orphans: bool = False,
               report: Callable[[StepResult], None] | None = None) -> list[StepResult]:
    """Run the six upkeep steps in DuckDB's CHECKPOINT order with no arguments but the lake's options
    (expire_older_than: nothing expires without it; delete_older_than, default 2 days; target_file_size;
    rewrite_delete_threshold, default 0.95; auto_compact per table). Returns what each step did, in order.

    force_orphans is delete_orphaned_files' force (files that look like another lake's are deleted too; DuckDB's
    CHECKPOINT deletes them). report, if given, is called with each step's result as soon as it is done (so that a
    failing step's predecessors are reported too).

    Raises:
        ForeignFilesError: orphan deletion found files that look like another lake's (the other steps are done).
        CommitConflictError / DuckLakeError: a step failed; the steps before it stay done.
    """
    steps = {
        "flush_inlined_data": lambda: mt.flush_inlined_data(lake),
        "expire_snapshots": lambda: mt.expire_snapshots(lake),
        "merge_adjacent_files": lambda: mt.merge_adjacent_files(lake),
        "rewrite_data_files": lambda: mt.rewrite_data_files(lake),
        "cleanup_old_files": lambda: mt.cleanup_old_files(lake),
        "delete_orphaned_files": lambda: mt.delete_orphaned_files(lake, force=force_orphans),
    }
    out = []
    for name in STEPS:
        out.append(StepResult(name, steps[name]()))
        if report is not None:
            report(out[-1])
    return out
