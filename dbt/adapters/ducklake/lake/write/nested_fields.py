"""Schema evolution inside a nested column, as the reference writes it (DuckDB 1.5's DuckLakeTableEntry: AddField,
RemoveField, RenameField and the nested TypePromotion of ALTER COLUMN ... TYPE).

A nested change never rewrites a file and keeps every surviving field's id, so old files keep reading by field id:
a field they lack reads NULL, a renamed field keeps its values, a widened one is cast. Only the rows of the fields
that change are written; the parent rows stay. The new rows carry the flags the reference gives them, which differ
by statement (its quirks, kept so both sides write the same catalog): `nulls_allowed` is false for a field added by
ADD COLUMN s.f, renamed or widened, true for one a type change adds; `default_value_type` is '' for a renamed or
widened field and for a nested field a type change adds. DuckDB enforces no NOT NULL inside a nested column, and
neither does this library: the reader treats every nested field as nullable (catalog/state.build_column_tree).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..errors import NoSuchColumnError, SchemaEvolutionError
from ..records import Column
from ..types import parse_type
from .promotions import promotion_allowed


@dataclass(frozen=True)
class FieldRow:
    """A ducklake_column row a nested change begins (the column's id, name and type; its children have their own)."""

    column: Column
    parent: int
    nulls_allowed: bool
    default_value_type: str


@dataclass(frozen=True)
class NestedChange:
    """One top-level column's new tree, the ids whose rows end, and the rows that begin."""

    column: Column
    ended: tuple[int, ...]
    rows: tuple[FieldRow, ...]

    @property
    def added_ids(self) -> tuple[int, ...]:
        """The ids this change gives out (new fields; a renamed or widened field keeps its id)."""
        ended = set(self.ended)
        return tuple(r.column.column_id for r in self.rows if r.column.column_id not in ended)


def _child(node: Column, name: str, where: str) -> Column:
    for c in node.children:
        if c.name.lower() == name.lower():
            return c
    raise NoSuchColumnError(f"{where} has no field {name!r} (its fields: {[c.name for c in node.children]})")


def _chain(top: Column, path: Sequence[str]) -> list[Column]:
    """The nodes from the top-level column down the path (path[0] names the top-level column)."""
    nodes = [top]
    for i, name in enumerate(path[1:], start=1):
        nodes.append(_child(nodes[-1], name, ".".join(path[:i])))
    return nodes


def _rebuild(nodes: list[Column], new_leaf: Column | None) -> Column:
    """The top-level column with the last node of the chain replaced (or removed, new_leaf None)."""
    out = new_leaf
    for parent, old in zip(reversed(nodes[:-1]), reversed(nodes[1:]), strict=True):
        kids = [c for c in parent.children if c.column_id != old.column_id] if out is None else [
            out if c.column_id == old.column_id else c for c in parent.children]
        out = replace(parent, children=tuple(kids))
    assert out is not None
    return out


def _with_ids(column: Column, next_id: Callable[[], int]) -> Column:
    """The column with fresh ids, parent before children (as the reference numbers a new field)."""
    cid = next_id()
    return replace(column, column_id=cid, nullable=True, children=tuple(_with_ids(c, next_id) for c in column.children))


def _rows(column: Column, parent: int, nulls_allowed: bool, literal_nested: bool) -> list[FieldRow]:
    """The rows of a new field and its children, depth first."""
    dvt = "literal" if literal_nested or not column.is_nested else ""
    out = [FieldRow(column, parent, nulls_allowed, dvt)]
    for c in column.children:
        out += _rows(c, column.column_id, nulls_allowed, literal_nested)
    return out


def _path_text(path: Sequence[str]) -> str:
    return ".".join(path)


def add_field(top: Column, path: Sequence[str], field: Column, next_id: Callable[[], int]) -> NestedChange:
    """ALTER TABLE t ADD COLUMN s.f TYPE: path names the new field (its last part is field.name's place).

    Raises:
        SchemaEvolutionError: the parent is not a struct, or already has a field of that name.
    """
    nodes = _chain(top, path[:-1])
    parent = nodes[-1]
    where = _path_text(path[:-1])
    if parent.type != "struct":
        raise SchemaEvolutionError(f"cannot add field {_path_text(path)!r}: fields can only be added to structs, "
                                   f"{where!r} is a {parent.type}")
    if any(c.name.lower() == path[-1].lower() for c in parent.children):
        raise SchemaEvolutionError(f"cannot add field {_path_text(path)!r}: {where!r} already has a field "
                                   f"{path[-1]!r}")
    new = _with_ids(replace(field, name=path[-1]), next_id)
    changed = _rebuild(nodes, replace(parent, children=parent.children + (new,)))
    return NestedChange(changed, (), tuple(_rows(new, parent.column_id, False, True)))


def drop_field(top: Column, path: Sequence[str]) -> NestedChange:
    """ALTER TABLE t DROP COLUMN s.f: the field and its children end.

    Raises:
        SchemaEvolutionError: the field is a list's element or a map's key or value, or the struct's only field
            (a struct without fields is no type: DuckDB 1.5 drops it and then cannot load the table).
    """
    nodes = _chain(top, path)
    parent, field = nodes[-2], nodes[-1]
    if parent.type != "struct":
        raise SchemaEvolutionError(f"cannot drop {_path_text(path)!r}: only struct fields can be dropped, "
                                   f"{_path_text(path[:-1])!r} is a {parent.type}")
    if len(parent.children) == 1:
        raise SchemaEvolutionError(f"cannot drop {_path_text(path)!r}: it is the only field of "
                                   f"{_path_text(path[:-1])!r} (drop the struct instead)")
    changed = _rebuild(nodes[:-1], replace(parent, children=tuple(c for c in parent.children if c is not field)))
    return NestedChange(changed, tuple(c.column_id for c in field.walk()), ())


def rename_field(top: Column, path: Sequence[str], new_name: str) -> NestedChange:
    """ALTER TABLE t RENAME COLUMN s.f TO g: the field's row ends and begins again with the new name (same id).

    Raises:
        SchemaEvolutionError: the field is not a struct's, or the struct has a field of the new name.
    """
    nodes = _chain(top, path)
    parent, field = nodes[-2], nodes[-1]
    where = _path_text(path[:-1])
    if parent.type != "struct":
        raise SchemaEvolutionError(f"cannot rename {_path_text(path)!r}: only struct fields can be renamed, "
                                   f"{where!r} is a {parent.type}")
    if any(c.name.lower() == new_name.lower() for c in parent.children if c is not field):
        raise SchemaEvolutionError(f"cannot rename {_path_text(path)!r} to {new_name!r}: {where!r} already has a "
                                   f"field {new_name!r}")
    renamed = replace(field, name=new_name)
    row = FieldRow(replace(renamed, children=()), parent.column_id, False, "")
    return NestedChange(_rebuild(nodes, renamed), (field.column_id,), (row,))


def evolve(top: Column, target: Column, next_id: Callable[[], int]) -> NestedChange:
    """ALTER TABLE t ALTER COLUMN s TYPE <nested type>: fields matched by name (case-insensitive) keep their ids,
    new ones get ids, missing ones end, leaves widen by the reference's promotion rules (target's ids ignored).

    Raises:
        SchemaEvolutionError: a field changes kind (struct to int, list to struct, ...) or narrows; naming it.
    """
    ended: list[int] = []
    rows: list[FieldRow] = []

    def walk(old: Column, new: Column, path: str, parent: int | None) -> Column:
        if old.children or new.children:
            if old.type != new.type:
                raise SchemaEvolutionError(f"cannot change {path!r} from {old.type} to {new.type}: a nested "
                                           "column keeps its kind (struct, list, map); only its fields evolve")
            by_name = {c.name.lower(): c for c in old.children}
            kids = []
            for n in new.children:
                o = by_name.pop(n.name.lower(), None)
                if o is None:
                    added = _with_ids(n, next_id)
                    rows.extend(_rows(added, old.column_id, True, False))
                    kids.append(added)
                else:
                    kids.append(walk(o, n, f"{path}.{o.name}", old.column_id))
            if not kids:
                raise SchemaEvolutionError(f"cannot change {path!r} to a struct without fields")
            for gone in by_name.values():
                ended.extend(c.column_id for c in gone.walk())
            return replace(old, children=tuple(kids))
        t = parse_type(new.type)
        if t == old.type:
            return old
        if not promotion_allowed(old.type, t):
            raise SchemaEvolutionError(f"cannot change {path!r} from {old.type} to {t}: only widening type "
                                       "promotions are allowed (e.g. int32 -> int64, float32 -> float64)")
        widened = replace(old, type=t)
        if parent is not None:
            ended.append(old.column_id)
            rows.append(FieldRow(widened, parent, False, ""))
        return widened

    if not (top.children and target.children):
        raise SchemaEvolutionError(f"cannot change {top.name!r} from {top.type} to {target.type}: only a nested "
                                   "column evolves by its fields")
    column = walk(top, target, top.name, None)
    return NestedChange(column, tuple(ended), tuple(rows))
