"""What a transaction needs of its lake: the catalog, the lake's state and options, and where a commit's outcome is
noted. The facade (`DuckLake`) is one; naming this instead of the facade keeps `write/` below it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..catalog.state_source import StateSource

if TYPE_CHECKING:
    from ..records import Snapshot
    from .builder import CatalogBuilder
    from .commit_outcome import CommitAttempt


class LakeHandle(StateSource, Protocol):
    inlining_limits: dict[tuple[str, str], int]
    default_inlining_limit: int | None

    def table_options(self, table_id: int) -> dict[str, str]:
        """The options set for one table (table scope only)."""
        ...

    def write_option_rows(self) -> list[tuple[str | None, int | None, str, str]]:
        """The write options set in the lake, any scope: (scope, scope_id, key, value)."""
        ...

    def note_commit(self, done: CatalogBuilder, snapshot: Snapshot, token: object | None = None) -> None:
        """A transaction committed with this working catalog: its state becomes the latest known."""
        ...

    def note_unknown_commit(self, attempt: CommitAttempt) -> None:
        """A commit whose outcome is unknown: its files stay until the catalog says it did not land."""
        ...

    def resolve_unknown_commits(self) -> list[CommitAttempt]:
        """Ask the catalog about the commits whose outcome was unknown; returns those still unknown."""
        ...
