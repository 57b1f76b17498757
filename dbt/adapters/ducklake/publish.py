"""Write-audit-publish: a whole dbt invocation staged in ONE `LakeWork` and published as one DuckLake snapshot at its
end, only if no node failed (profile `write_audit_publish: true`).

Every connection (every dbt thread) stages into the invocation's shared unit under one lock; statements that read
an object the unit changed read its staged state (spark/write/staged_reads via `LakeNames.staged`), so downstream models,
tests and snapshots audit what would be published. Node results come from dbt's own events (NodeFinished), the
adapter's only view of them; the decision is made when dbt cleans up the connections at the end of the run (after
on-run-end hooks): publish if every node passed (a test of severity warn does not block), else abandon (the
written files are removed) and say why.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, Protocol

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from .invocation import dbt_command as _command
from .lake.errors import CommitConflictError, DuckLakeError
from .lake.records import Snapshot, TableInfo
from .spark.write.work import LakeWork

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from .change_feed import Cursors
    from .lake.lake import DuckLake
    from .spark.read.names import LakeNames

logger = AdapterLogger("DuckLake")

# the commands whose changes a build stages (others, e.g. run-operation maintenance, commit as usual)
WAP_COMMANDS = frozenset({"build", "run", "seed", "snapshot"})
# node statuses that keep the build from being published (dbt's NodeStatus values)
# ("started": a node that never finished, e.g. interrupted)
BLOCKING = frozenset({"error", "fail", "skipped", "runtime error", "partial success", "started"})
NO_NODE = "(outside a node)"  # changes made by hooks of the run itself (on-run-start / on-run-end)


class BuildHost(Protocol):
    """What a build uses of the process's runtime (runtime.Runtime): its session, lake, names and change-feed
    cursors, and where the invocation's build is kept. Named here so that this module does not import the runtime,
    which keeps a build."""

    spark: SparkSession
    lake: DuckLake
    names: LakeNames
    cursors: Cursors
    build: Build | None


class Build:
    """The staged changes of one dbt invocation, and what its nodes reported."""

    def __init__(self, runtime: BuildHost, invocation_id: str) -> None:
        self.runtime = runtime
        self.invocation_id = invocation_id
        self.lock = threading.RLock()
        self.work: LakeWork | None = None
        self.operations: dict[str, list[str]] = {}  # node unique_id -> its staged operations, in staging order
        self.results: dict[str, str] = {}  # node unique_id -> dbt status
        self.cursors: list[tuple[str, str]] = []  # change-feed cursors staged with their models
        self.cancelled = False
        self.finished = False

    # what LakeNames reads the staged state through (spark.read.names.StagedReader) -------------------------------------
    @property
    def touched(self) -> set[tuple[str, str]]:
        work = self.work
        return work.touched if work is not None else set()

    def read_sql(self, schema: str, name: str) -> str | None:
        with self.lock:
            return self.work.read_sql(schema, name) if self.work is not None else None

    def staged_table(self, schema: str, name: str) -> TableInfo | None:
        """The table as the build has it, when the build changed it."""
        with self.lock:
            if self.work is None or (schema.lower(), name.lower()) not in self.work.touched:
                return None
            try:
                return self.work.table(schema, name)
            except DuckLakeError:
                return None

    # staging ------------------------------------------------------------------------------------------------------
    def stage(self, stage: Callable[[LakeWork], int], node: str | None, operation: str) -> int:
        with self.lock:
            if self.finished:
                raise DbtRuntimeError("write-audit-publish: this build was already published or abandoned")
            if self.work is None:
                self.work = LakeWork(self.runtime.spark, self.runtime.lake)
                self.runtime.names.staged = self
            result = stage(self.work)
            self.operations.setdefault(node or NO_NODE, []).append(operation)
            return result

    def node_committed(self, node: str | None) -> None:
        """dbt's COMMIT of a node: nothing is committed; the node's change-feed cursors join the build's unit."""
        with self.lock:
            if self.work is not None:
                self.cursors += self.runtime.cursors.stage(self.work, node)

    def on_event(self, msg: Any) -> None:
        """dbt event callback: remember each node's final status."""
        name = msg.info.name
        if name == "NodeStart":
            self.results.setdefault(msg.data.node_info.unique_id, "started")
        elif name == "NodeFinished":
            self.results[msg.data.node_info.unique_id] = msg.data.run_result.status
        elif name == "SkippingDetails":  # nodes never run (on-run-start failed)
            self.results[msg.data.node_info.unique_id] = "skipped"

    # ending ---------------------------------------------------------------------------------------------------------
    def blockers(self) -> list[str]:
        return [f"{uid} ({status})" for uid, status in self.results.items() if status in BLOCKING]

    def finish(self, author: str, provenance: dict[str, Any]) -> Snapshot | None:
        """Publish everything staged as one snapshot, or, after a failure or a cancel, nothing."""
        with self.lock:
            if self.finished:
                return None
            self.finished = True
            work = self.work
            if work is None:
                return None
            touched = set(work.touched)
            try:
                blockers = self.blockers()
                if self.cancelled or blockers or work.is_empty:
                    work.rollback()
                    if not work.is_empty or blockers or self.cancelled:
                        why = "the run was cancelled" if self.cancelled else "of " + ", ".join(blockers)
                        logger.warning(f"write-audit-publish: nothing was published because {why}; the lake is "
                                       f"unchanged and the files this build wrote were removed")
                    return None
                nodes = [n for n in self.operations if n != NO_NODE]
                message = (f"write-audit-publish of dbt invocation {self.invocation_id}: {len(nodes)} nodes: "
                           + ", ".join(nodes))
                extra = {**provenance, "write_audit_publish": True, "nodes": self.operations}
                try:
                    snap = work.commit(author=author, commit_message=message, commit_extra_info=json.dumps(extra))
                except CommitConflictError as e:
                    changed = ", ".join(f"{s}.{n}" for s, n in sorted(touched))
                    raise DbtRuntimeError(
                        f"write-audit-publish: the build could not be published: {e}. Another writer committed a "
                        f"conflicting change while it ran (the build changed {changed}); nothing was published and "
                        "the files it wrote were removed: run the build again") from None
                except DuckLakeError as e:  # e.g. the catalog failed while committing (the message says what is known)
                    raise DbtRuntimeError(f"write-audit-publish: publishing the build failed: {e}") from None
                if snap is not None:
                    logger.info(f"write-audit-publish: published snapshot {snap.snapshot_id} with the changes of "
                                f"{len(nodes)} nodes")
                return snap
            finally:
                self.runtime.names.staged = None
                self.runtime.cursors.done(self.cursors)
                self.runtime.names.invalidate(touched)


_LOCK = threading.Lock()


def build_for(runtime: BuildHost, enabled: bool) -> Build | None:
    """The invocation's build when write-audit-publish is on for this command (created on the first connection of
    the invocation, when it also starts listening to dbt's node results)."""
    if not enabled:
        return None
    from dbt_common.invocation import get_invocation_id

    command = _command()
    if command == "retry":
        # a failed build published nothing, so retrying only its failed nodes would publish a part of it
        raise DbtRuntimeError("write-audit-publish: `dbt retry` would publish only the nodes that failed last time "
                              "(the failed build published nothing): run the whole `dbt build` again")
    if command not in WAP_COMMANDS:
        return None
    invocation = get_invocation_id()
    with _LOCK:
        build = runtime.build
        if build is None or build.invocation_id != invocation:
            if build is not None and not build.finished:  # an earlier invocation of this process ended without cleanup
                with build.lock:
                    build.finished = True
                    if build.work is not None:
                        build.work.rollback()
                    runtime.names.staged = None
            build = runtime.build = Build(runtime, invocation)
            from dbt_common.events.event_manager_client import add_callback_to_manager

            add_callback_to_manager(build.on_event)
        return build
