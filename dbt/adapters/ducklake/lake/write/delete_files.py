"""The delete files of a commit, written before its catalog transaction begins, as the reference writes them.

A commit attempt asks for each delete file by what it holds (DeleteFileSpec); one written earlier with the same
content is used, else the attempt names it and rolls back, and the transaction writes it and tries again. The
content depends on the attempt's snapshot only where positions carry their snapshot, so a retry after another writer
committed reuses the files whose content did not change.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..paths import delete_file_name, join_path
from ..read.deletes import DeletePositions, write_delete_file, write_deletion_vector, write_puffin_deletes


@dataclass(frozen=True)
class DeleteFileSpec:
    """What one delete file holds. kind: "parquet" (a delete file), "vector" (a deletion vector of this snapshot's
    deletes) or "puffin" (DuckLake 1.1's cumulative vectors); snapshots: each position's snapshot, None when the
    file carries none."""

    kind: str
    data_file_path: str
    directory: str
    positions: tuple[int, ...]
    snapshots: tuple[int, ...] | None

    def write(self) -> tuple[str, int, int]:
        """Write the file into the data file's folder under a new name: (path, size, footer size)."""
        path = join_path(self.directory, delete_file_name(deletion_vector=self.kind != "parquet"))
        if self.kind == "vector":
            size, footer = write_deletion_vector(path, self.positions), 0
        elif self.kind == "puffin":
            assert self.snapshots is not None
            size, footer = write_puffin_deletes(path, self.data_file_path,
                                                DeletePositions(self.positions, self.snapshots))
        else:
            with_snapshots = self.snapshots is not None
            deletes = DeletePositions(self.positions, self.snapshots or ())
            size, footer = write_delete_file(path, self.data_file_path, deletes, with_snapshots=with_snapshots)
        return path, size, footer
