"""A statement's lake reads bound to its snapshot: the `schema.name` of each lake table or view it reads is replaced
in its text by a private relation that reads the object as that snapshot has it.

Why: the `schema.name` views (`names.LakeNames`) are one set per Spark session, shared by every dbt thread and
re-pointed whenever a statement sees a newer snapshot. A statement analysed after another thread re-pointed a name
read another snapshot than the one it planned with (file pruning, MERGE bounds, the unit's base), and Spark drops the
cached data of every plan that reads a view when that view is replaced, so a statement's later jobs recomputed what
it had cached. A private relation is named after the SQL it runs (a hash), so it never changes once it exists:
statements of several threads at several snapshots each read their own, and none is replaced under another.

On a classic session a private relation is a temporary view holding the analysed plan (analysed once, not at every
query as a persistent view is); on Spark Connect, whose DataFrames are analysed on the server each time they run, it
is the SQL itself as a derived table (bounded: manifest reads, `scan.plan_sql`), so a result read later still reads
the same files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ..sql_literals import ident

Key = tuple[str, str]  # (schema, name), lower case
_PLAIN_TABLE = frozenset({"this", "db", "alias"})  # `schema.name [alias]`: no time travel, sample, hint or catalog


def parse(sql: str) -> exp.Expr | None:
    """The statement's tree (Spark dialect), None when sqlglot cannot parse it."""
    try:
        return sqlglot.parse_one(sql, read="spark")
    except (ParseError, TokenError, ValueError):
        return None


def read_refs(tree: exp.Expr, written: exp.Expr | None = None) -> set[Key]:
    """The qualified names the statement reads that a binding can replace (see `rebind`)."""
    return {_key(t) for t in _plain_tables(tree, written)}


def _key(t: exp.Table) -> Key:
    return (t.db.lower(), t.name.lower())


def _plain_tables(tree: exp.Expr, written: exp.Expr | None) -> list[exp.Table]:
    # a column named schema.table.column refers to the table by its full name: renaming the table would break it
    if any(c.args.get("db") for c in tree.find_all(exp.Column)):
        return []
    out = []
    for t in tree.find_all(exp.Table):
        if t is written or not t.db or not t.name:
            continue
        if {k for k, v in t.args.items() if v} - _PLAIN_TABLE:
            continue
        db, name = t.args["db"], t.this
        if "start" in db.meta and "end" in name.meta:
            out.append(t)
    return out


def rebind(sql: str, relations: Mapping[Key, str], tree: exp.Expr | None = None,
           written: Callable[[exp.Expr], exp.Expr | None] | None = None) -> str:
    """The statement with each plain qualified read of a name in `relations` replaced by its relation (aliased as the
    table's own name when it had no alias, so `name.column` still resolves); the target a statement writes
    (`written(tree)`) stays. The text outside the replaced names is kept as written."""
    if not relations:
        return sql
    tree = tree if tree is not None else parse(sql)
    if tree is None:
        return sql
    skip = written(tree) if written is not None else None
    edits = []
    for t in _plain_tables(tree, skip):
        rel = relations.get(_key(t))
        if rel is None:
            continue
        start, end = t.args["db"].meta["start"], t.this.meta["end"] + 1
        edits.append((start, end, rel if t.alias else f"{rel} AS {ident(t.name)}"))
    for start, end, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[end:]
    return sql


def view_refs(sql: str) -> set[Key] | None:
    """The qualified names a view's Spark SQL reads; None when it does not parse (the view then cannot be bound)."""
    tree = parse(sql)
    if tree is None:
        return None
    return {(t.db.lower(), t.name.lower()) for t in tree.find_all(exp.Table) if t.db and t.name}


def unbound(refs: Iterable[Key], relations: Mapping[Key, str]) -> set[Key]:
    """The refs a binding left to the shared names."""
    return {r for r in refs if r not in relations}
