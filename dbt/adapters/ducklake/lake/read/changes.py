"""What changed in a table between two snapshots, at the format level (the inputs of a change feed).

Follows the reference's ducklake_table_changes: insertions are rows of files (or inlined rows) whose snapshot lies in
[start, end]; deletions are positions of delete files, ended files and inlined deletes whose snapshot lies in the range;
an insert and a delete of the same rowid in the same snapshot form an update (preimage + postimage).

One quirk is kept on purpose: a delete file without a snapshot column (the first delete of a data file) on a data file
that carries per-row snapshots (merged or flushed files) reports each deleted row at the row's own insert snapshot,
not at the delete file's snapshot. The reference does so (its deletion scan takes the snapshot column of the data file
when the delete file has none), so a later delete of a compacted row shows up at its insert snapshot: paired with the
insertion as update pre/postimages when the range holds the insert, as a delete outside [start, end] otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..catalog.database import CatalogDB
from ..catalog.state import LakeState, load_files
from ..catalog.state_advance import changed_by
from ..catalog.state_source import StateSource
from ..records import DataFile, TableInfo
from .deletes import SNAPSHOT_COLUMN, delete_file_has_snapshots, read_delete_file
from .file_checks import DELETE_FILE, ListedFile, data_file, reading, verify
from .scan import ROWID, FileScanTask, read_file


@dataclass(frozen=True)
class FileInsertions:
    """Rows of one data file inserted in the range: all of them, or those whose per-row snapshot is in range."""

    data_file: DataFile
    per_row_snapshots: bool  # filter on _ducklake_internal_snapshot_id (merged/flushed files)


@dataclass(frozen=True)
class FileDeletions:
    """Positions of one data file deleted in the range, each with the snapshot that deleted it."""

    data_file: DataFile
    positions: tuple[tuple[int, int], ...]  # (position, snapshot)
    # positions read from a delete file without a snapshot column: reported at the row's insert snapshot when the
    # data file carries per-row snapshots (see the module)
    at_insert: frozenset[int] = frozenset()


@dataclass(frozen=True)
class TableChanges:
    table: TableInfo  # as of the end snapshot
    start: int
    end: int
    insertions: tuple[FileInsertions, ...]
    deletions: tuple[FileDeletions, ...]
    inlined_inserts: tuple[tuple[int, int], ...]  # (row_id, snapshot)
    inlined_deletes: tuple[tuple[int, int], ...]  # (row_id, snapshot)


def changes_context(schema: str, table: str, start: int, end: int) -> str:
    """How errors about the files of a change feed name what was read."""
    return f"lake table {schema}.{table} (changes from snapshot {start} to {end})"


def plan_changes(lake: StateSource, schema: str, table: str, start: int, end: int) -> TableChanges:
    """The files, positions and inlined rows that changed in schema.table within snapshots [start, end].

    Raises:
        MissingDataFileError: a delete file it reads, or a data file whose rows changed, is missing or damaged.
    """
    state = lake.snapshot(end)
    info = state.table(schema, table)
    db = lake.db
    with db.read() as conn:
        files = _files_in_range(state, conn, info, start, end)
        inlined_ins, inlined_del = _inlined_changes(state, conn, info, start, end)
    context = changes_context(info.schema_name, info.name, start, end)
    verify(context, [ListedFile(f.delete_file.path, f.delete_file.file_size_bytes, DELETE_FILE)
                     for f, _ in files if f.delete_file is not None])
    insertions: list[FileInsertions] = []
    deletions: list[FileDeletions] = []
    from_files: dict[int, tuple[dict[int, int], bool]] = {}  # data file id -> (position -> snapshot, plain file)
    for f, _ in files:
        if f.delete_file is not None:
            with reading(context, ListedFile(f.delete_file.path, f.delete_file.file_size_bytes, DELETE_FILE)):
                d = read_delete_file(f.delete_file.path, f.delete_file.begin_snapshot)
            from_files[f.data_file_id] = (dict(zip(d.positions, d.snapshots, strict=True)),
                                          not delete_file_has_snapshots(f.delete_file.path))
    committed = _committed_at(db, info.table_id,
                              {s for m, _ in from_files.values() for s in m.values() if s <= end})
    for f, end_snapshot in files:
        if start <= f.begin_snapshot <= end or (f.partial_max is not None and f.partial_max >= start):
            insertions.append(FileInsertions(f, f.partial_max is not None))
        found, is_plain = from_files.get(f.data_file_id, ({}, False))
        deleted = {p: committed.get(s, s) for p, s in found.items()}
        by_files = dict(deleted)  # deletes of the delete file alone
        plain: set[int] = set(found) if is_plain else set()
        for pos, begin in f.inlined_deletes:
            deleted.setdefault(pos, begin)
        in_range = {p: s for p, s in deleted.items() if start <= s <= end}
        inlined_in_range = any(start <= begin <= end for _, begin in f.inlined_deletes)
        if end_snapshot is not None and start <= end_snapshot <= end and not inlined_in_range:
            # the file ended in range: every row not deleted by a delete file before then was deleted at its end.
            # The reference reports no such rows when the file also has inlined deletes in range (only those), and
            # does not subtract inlined deletes made before the range: both kept, to report what it reports.
            for p in range(f.record_count):
                if p not in by_files or by_files[p] >= end_snapshot:
                    in_range[p] = end_snapshot
                    plain.discard(p)  # a whole-file delete names its snapshot
        if in_range:
            at_insert = frozenset(p for p in plain if p in in_range)
            deletions.append(FileDeletions(f, tuple(sorted(in_range.items())), at_insert))
    # the data files whose rows are read (a file listed both ways is checked once)
    verify(context, [data_file(f) for f in [*(c.data_file for c in insertions), *(c.data_file for c in deletions)]])
    return TableChanges(info, start, end, tuple(insertions), tuple(deletions), tuple(inlined_ins), tuple(inlined_del))


def _committed_at(db: CatalogDB, table_id: int, claimed: set[int]) -> dict[int, int]:
    """For each snapshot id a delete file gives its rows that is no commit changing the table: the first later
    snapshot that changed it (the commit that wrote them); the others are left out (they are right).

    Why: DuckDB 1.5.5 writes a delete file's per-row snapshot column while its transaction runs, with the id it
    expects to commit as; when another writer commits first, it commits under a later id and the rows keep the
    expected one (docs/design/snapshot-isolation.md). Without this, a feed that read up to that other writer's snapshot
    before the delete committed, and reads on from the next one, would never see the delete. A snapshot expired since
    cannot be judged and is kept."""
    if not claimed:
        return {}
    with db.read() as conn:
        rows = db.query(
            conn,
            "SELECT s.snapshot_id, c.changes_made FROM {p}ducklake_snapshot s "
            "LEFT JOIN {p}ducklake_snapshot_changes c USING (snapshot_id) WHERE s.snapshot_id >= :lo "
            "AND (s.snapshot_id IN (" + ", ".join(str(int(x)) for x in sorted(claimed)) + ") "
            "OR c.changes_made LIKE :pattern) ORDER BY s.snapshot_id",
            {"lo": min(claimed), "pattern": f"%:{table_id}%"},
        )
    changing = []
    exists = set()
    for sid, text in rows:
        exists.add(sid)
        ids = changed_by(text)
        if ids is None or table_id in ids:
            changing.append(sid)
    out: dict[int, int] = {}
    known = set(changing)
    for s in claimed:
        if s in exists and s not in known:
            later = next((c for c in changing if c > s), None)
            if later is not None:
                out[s] = later
    return out


def _files_in_range(state: LakeState, conn: object, info: TableInfo, start: int, end: int) -> list[tuple[DataFile, int | None]]:
    """Data files that existed at some point in [start, end], each with its end_snapshot."""
    db = state.db
    rows = db.query(
        conn,  # type: ignore[arg-type]
        "SELECT data_file_id, end_snapshot FROM {p}ducklake_data_file WHERE table_id = :t AND begin_snapshot <= :e "
        "AND (end_snapshot IS NULL OR end_snapshot >= :s)",
        {"t": info.table_id, "s": start, "e": end},
    )
    ends = dict(rows)
    out = []
    # load each file as visible just before it ended (or at end), so its last delete file comes along
    by_snapshot: dict[int, list[int]] = {}
    for fid, e in ends.items():
        at = end if e is None or e > end else e - 1
        by_snapshot.setdefault(at, []).append(fid)
    for at, fids in by_snapshot.items():
        view = LakeState(db, state.snapshot, state.data_path, state.schemas, state.tables, state.views)
        object.__setattr__(view, "snapshot", _with_id(state.snapshot, at))
        for f in load_files(db, conn, view, info):  # type: ignore[arg-type]
            if f.data_file_id in fids:
                out.append((f, ends[f.data_file_id]))
    return out


def _with_id(snap: object, snapshot_id: int) -> object:
    from dataclasses import replace

    return replace(snap, snapshot_id=snapshot_id)  # type: ignore[type-var]


def _inlined_changes(state: LakeState, conn: object, info: TableInfo, start: int, end: int
                     ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    db = state.db
    ins, dels = [], []
    sys = db.spec.inlined
    for it in state.inlined_tables(info):
        for row_id, begin, finish in db.query(
            conn,  # type: ignore[arg-type]
            f"SELECT {sys.row_id}, {sys.begin_snapshot}, {sys.end_snapshot} FROM {db.t(it.table_name)} "
            f"WHERE ({sys.begin_snapshot} BETWEEN :s AND :e) OR ({sys.end_snapshot} BETWEEN :s AND :e)",
            {"s": start, "e": end},
        ):
            if start <= begin <= end:
                ins.append((row_id, begin))
            if finish is not None and start <= finish <= end:
                dels.append((row_id, finish))
    return ins, dels


def read_changes(lake: StateSource, schema: str, table: str, start: int, end: int) -> pa.Table:
    """The change feed as Arrow: snapshot_id, rowid, change_type, then the table's columns (as of end)."""
    plan = plan_changes(lake, schema, table, start, end)
    cols = plan.table.columns
    mappings = lake.snapshot(end).name_mappings(plan.table)
    inserted: list[pa.Table] = []
    deleted: list[pa.Table] = []
    context = changes_context(plan.table.schema_name, plan.table.name, start, end)
    for ins in plan.insertions:
        f = ins.data_file
        with reading(context, data_file(f)):
            raw = read_file(FileScanTask(f, (), None, mappings.get(f.mapping_id or -1)), cols, True)
        snaps = _row_snapshots(f, raw.num_rows)
        t = raw.append_column("snapshot_id", snaps)
        mask = pc.and_(pc.greater_equal(t.column("snapshot_id"), start), pc.less_equal(t.column("snapshot_id"), end))
        inserted.append(t.filter(mask))
    for de in plan.deletions:
        f = de.data_file
        with reading(context, data_file(f)):
            raw = read_file(FileScanTask(f, (), None, mappings.get(f.mapping_id or -1)), cols, True)
        idx = pa.array([p for p, _ in de.positions], pa.int64())
        snaps = [s for _, s in de.positions]
        embedded = _embedded_snapshots(f) if de.at_insert else None
        if embedded is not None:
            own = embedded.to_pylist()
            snaps = [own[p] if p in de.at_insert else s for p, s in de.positions]
        t = raw.take(idx).append_column("snapshot_id", pa.array(snaps, pa.int64()))
        deleted.append(t)
    if plan.inlined_inserts or plan.inlined_deletes:
        from .inlined import read_inlined

        for t in read_inlined(lake.snapshot(end), plan.table, True, history=True):
            begin, finish = t.column("begin_snapshot"), t.column("end_snapshot")
            rows = t.drop_columns(["begin_snapshot", "end_snapshot"])
            ins_mask = pc.and_(pc.greater_equal(begin, start), pc.less_equal(begin, end))
            inserted.append(rows.filter(ins_mask).append_column("snapshot_id", begin.filter(ins_mask)))
            del_mask = pc.fill_null(pc.and_(pc.greater_equal(finish, start), pc.less_equal(finish, end)), False)
            deleted.append(rows.filter(del_mask).append_column("snapshot_id", finish.filter(del_mask)))
    return _pair(inserted, deleted, cols)


def _row_snapshots(f: DataFile, n: int) -> pa.Array:
    if f.partial_max is None:
        return pa.array([f.begin_snapshot] * n, pa.int64())
    import pyarrow.parquet as pq

    from ..storage import parquet_source

    with parquet_source(f.path) as source:
        col = pq.read_table(source, columns=[SNAPSHOT_COLUMN]).column(0)
    return col.combine_chunks().cast(pa.int64())


def _embedded_snapshots(f: DataFile) -> pa.Array | None:
    """The data file's per-row snapshot column, if it has one (whatever its partial_max says)."""
    import pyarrow.parquet as pq

    from ..storage import parquet_source

    with parquet_source(f.path) as source:
        pf = pq.ParquetFile(source)
        if SNAPSHOT_COLUMN not in pf.schema_arrow.names:
            return None
        return pf.read(columns=[SNAPSHOT_COLUMN]).column(0).combine_chunks().cast(pa.int64())


def _pair(inserted: list[pa.Table], deleted: list[pa.Table], cols: object) -> pa.Table:
    """Label rows insert/delete, and same-snapshot same-rowid pairs update_postimage/update_preimage."""
    ins = pa.concat_tables(inserted) if inserted else None
    dele = pa.concat_tables(deleted) if deleted else None
    ins_keys = set(zip(ins.column("snapshot_id").to_pylist(), ins.column(ROWID).to_pylist(), strict=True)) if ins else set()
    del_keys = set(zip(dele.column("snapshot_id").to_pylist(), dele.column(ROWID).to_pylist(), strict=True)) if dele else set()
    parts = []
    for t, kind, other, upd in ((ins, "insert", del_keys, "update_postimage"), (dele, "delete", ins_keys, "update_preimage")):
        if t is None:
            continue
        keys = zip(t.column("snapshot_id").to_pylist(), t.column(ROWID).to_pylist(), strict=True)
        labels = pa.array([upd if k in other else kind for k in keys], pa.string())
        t = t.append_column("change_type", labels)
        names = ["snapshot_id", ROWID, "change_type"] + [n for n in t.column_names if n not in ("snapshot_id", ROWID,
                                                                                                 "change_type")]
        parts.append(t.select(names))
    if not parts:
        return pa.table({"snapshot_id": pa.array([], pa.int64()), ROWID: pa.array([], pa.int64()),
                         "change_type": pa.array([], pa.string())})
    return pa.concat_tables(parts)
