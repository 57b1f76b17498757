"""Which statements change DuckLake objects, and their parts: the cursor's routing table, parsed with sqlglot.

Every statement is parsed with sqlglot's Spark dialect. A statement that changes a DuckLake object becomes a typed
`Change` the cursor applies through the Spark layer; everything else (queries, temporary views, SET, SHOW, ...) is
`Passthrough` and runs in Spark as written. Query parts keep their original text (sliced by token offsets), so Spark
runs exactly what dbt rendered; only small expressions (conditions, assignments, merge clauses) are re-rendered.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

logging.getLogger("sqlglot").setLevel(logging.ERROR)  # "falling back to Command" warnings are routine for SHOW etc.


class RoutingError(ValueError):
    """A statement on a DuckLake object that the adapter cannot apply (the message says what and why)."""


@dataclass(frozen=True)
class Passthrough:
    sql: str
    refs: frozenset[tuple[str, str]]  # names read (schema, name), lower case; schema "" when unqualified


@dataclass(frozen=True)
class TempView:
    """CREATE [OR REPLACE] TEMPORARY VIEW name AS query (dbt's temporary relations): the cursor keeps the query's
    analyzed plan as the view (a DataFrame's temp view), so later statements on it are not analyzed from text again."""

    name: str
    query: str
    replace: bool
    refs: frozenset[tuple[str, str]]


@dataclass(frozen=True)
class ShowRelations:
    """SHOW TABLES / SHOW VIEWS / SHOW TABLE EXTENDED [IN schema] [LIKE pattern]: answered from the lake catalog,
    since Spark knows only the lake objects that earlier statements registered."""

    kind: str  # tables | views | extended
    schema: str | None  # None: the current schema
    pattern: str | None  # Spark's pattern: '*' any characters, '|' alternatives, case-insensitive


@dataclass(frozen=True)
class TransactionControl:
    """BEGIN / COMMIT / ROLLBACK of the SQL session (not a lake.Transaction: the connection's unit of work)."""

    action: str  # begin | commit | rollback


@dataclass(frozen=True, kw_only=True)
class Change:
    """A statement that changes a lake object: one subclass per kind, each with only its own fields.

    `kind` labels the change where users see it: the cursor's message (`kind.upper()`, "INSERT 5") and the operation
    in the lake commit's message ("insert main.t"), so the labels must stay as they are.
    """

    kind: ClassVar[str]
    schema: str | None = None  # None only for schema-level changes (then `name` is the schema)
    name: str = ""
    refs: frozenset[tuple[str, str]] = frozenset()  # lake names the statement reads (see route)


@dataclass(frozen=True, kw_only=True)
class CreateSchema(Change):
    kind: ClassVar[str] = "create_schema"
    if_not_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class DropSchema(Change):
    kind: ClassVar[str] = "drop_schema"
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True, kw_only=True)
class Ctas(Change):
    """CREATE [OR REPLACE] TABLE t [(columns)] [options] AS query."""

    kind: ClassVar[str] = "ctas"
    query: str
    replace: bool = False
    if_not_exists: bool = False
    comment: str | None = None
    partition_by: tuple[str, ...] = ()
    not_null: tuple[str, ...] = ()  # columns declared NOT NULL in the column list
    types: tuple[tuple[str, str], ...] = ()  # (column path, DuckLake type) from TBLPROPERTIES ('ducklake.types'=...)
    sorted_by: str | None = None  # TBLPROPERTIES ('ducklake.sorted_by'=...): DuckDB sort keys
    table_options: tuple[tuple[str, str], ...] = ()  # TBLPROPERTIES ('ducklake.option.<name>'=...)


@dataclass(frozen=True, kw_only=True)
class Clone(Change):
    """CREATE [OR REPLACE] TABLE t [SHALLOW] CLONE source (Delta's syntax)."""

    kind: ClassVar[str] = "clone"
    source: tuple[str, str]  # (schema, name)
    replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class CreateTable(Change):
    """CREATE [OR REPLACE] TABLE t (columns) [options], without a query."""

    kind: ClassVar[str] = "create_table"
    columns_ddl: str  # "a INT, b STRING"
    replace: bool = False
    if_not_exists: bool = False
    comment: str | None = None
    partition_by: tuple[str, ...] = ()
    not_null: tuple[str, ...] = ()
    types: tuple[tuple[str, str], ...] = ()
    sorted_by: str | None = None
    table_options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class CreateView(Change):
    kind: ClassVar[str] = "create_view"
    query: str
    replace: bool = False
    if_not_exists: bool = False
    comment: str | None = None


@dataclass(frozen=True, kw_only=True)
class DropTable(Change):
    kind: ClassVar[str] = "drop_table"
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class DropView(Change):
    kind: ClassVar[str] = "drop_view"
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class Insert(Change):
    """INSERT INTO t [PARTITION (cols)] [(columns)] query: the query's columns by position."""

    kind: ClassVar[str] = "insert"
    query: str  # the query or VALUES, as written
    columns: tuple[str, ...] = ()  # INSERT INTO t (a, b)
    partition_by: tuple[str, ...] = ()  # dynamic PARTITION (col, ...)


@dataclass(frozen=True, kw_only=True)
class InsertOverwrite(Insert):
    """INSERT OVERWRITE: with PARTITION (cols) on a partitioned table, replaces only the partitions it writes."""

    kind: ClassVar[str] = "insert_overwrite"


@dataclass(frozen=True, kw_only=True)
class Delete(Change):
    kind: ClassVar[str] = "delete"
    condition: str | None = None  # the target's columns qualified as `t`


@dataclass(frozen=True, kw_only=True)
class Update(Change):
    kind: ClassVar[str] = "update"
    assignments: dict[str, str]
    condition: str | None = None


@dataclass(frozen=True)
class MergeClause:
    when: str  # matched | not_matched | not_matched_by_source
    action: str  # update | delete | insert
    condition: str | None = None
    assignments: dict[str, str] | None = None  # None = SET * / INSERT *
    insert_columns: tuple[str, ...] = ()
    insert_values: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Merge(Change):
    """MERGE INTO t USING source ON ... WHEN ...: conditions and expressions name the target `t`, the source `s`."""

    kind: ClassVar[str] = "merge"
    source: str  # a table name or a query's text
    on: str | None
    clauses: tuple[MergeClause, ...]


@dataclass(frozen=True, kw_only=True)
class Truncate(Change):
    kind: ClassVar[str] = "truncate"


@dataclass(frozen=True, kw_only=True)
class Rename(Change):
    kind: ClassVar[str] = "rename"
    new_name: str


@dataclass(frozen=True, kw_only=True)
class AddColumns(Change):
    kind: ClassVar[str] = "add_columns"
    columns_ddl: str
    types: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class DropColumn(Change):
    kind: ClassVar[str] = "drop_column"
    column: str
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class ColumnPathChange(Change):
    """A change of a column named by its path (`element`, `key`, `value` on the way through lists and maps):
    ADD COLUMN s.f TYPE (action add, type_ddl), DROP COLUMN s.f (drop), RENAME COLUMN c TO d or s.f TO g (rename,
    new_name)."""

    kind: ClassVar[str] = "alter_column"
    action: str
    path: tuple[str, ...]
    type_ddl: str = ""
    new_name: str = ""


@dataclass(frozen=True, kw_only=True)
class AlterType(Change):
    kind: ClassVar[str] = "alter_type"
    column: str
    new_type: str


@dataclass(frozen=True, kw_only=True)
class SetNullable(Change):
    """ALTER COLUMN c SET NOT NULL (nullable False) / DROP NOT NULL (nullable True)."""

    kind: ClassVar[str] = "set_nullable"
    column: str
    nullable: bool


@dataclass(frozen=True, kw_only=True)
class Comment(Change):
    """COMMENT ON TABLE/VIEW/COLUMN, or ALTER ... COMMENT: the table's comment when `column` is None."""

    kind: ClassVar[str] = "comment"
    text: str | None  # None removes the comment
    column: str | None = None


@dataclass(frozen=True, kw_only=True)
class Alter(Change):
    """An ALTER with several actions, each a change of the same table, applied in order in one unit of work."""

    kind: ClassVar[str] = "alter"
    actions: tuple[Change, ...]


@dataclass(frozen=True, kw_only=True)
class SetLayout(Change):
    """ALTER TABLE t SET TBLPROPERTIES ('ducklake.sorted_by'=..., 'ducklake.option.<name>'=...): the table's sort
    keys ('' resets them) and write options, as DuckDB's SET SORTED BY and set_option(..., table_name => ...)."""

    kind: ClassVar[str] = "set_layout"
    sorted_by: str | None = None
    table_options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Noop(Change):
    """An ALTER with no DuckLake meaning (SET TBLPROPERTIES etc.: Spark-catalog settings)."""

    kind: ClassVar[str] = "noop"


Statement = Passthrough | TransactionControl | Change | TempView | ShowRelations

_SHOW = re.compile(
    r"\s*SHOW\s+(TABLES|VIEWS|TABLE\s+EXTENDED)(?:\s+(?:IN|FROM)\s+((?:`[^`]+`|[\w$]+)(?:\.(?:`[^`]+`|[\w$]+))*))?"
    r"(?:\s+(?:LIKE\s+)?'((?:[^'\\]|\\.)*)')?\s*",
    re.IGNORECASE | re.DOTALL)


def _show(sql: str) -> ShowRelations | None:
    """SHOW TABLES|VIEWS|TABLE EXTENDED [IN|FROM ns] [[LIKE] 'pattern'] (leading comments allowed), else None."""
    body = sql
    while True:  # dbt puts its query comment first
        stripped = body.lstrip()
        if stripped.startswith("/*") and "*/" in stripped:
            body = stripped[stripped.index("*/") + 2:]
        elif stripped.startswith("--"):
            body = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        else:
            break
    m = _SHOW.fullmatch(body)
    if m is None:
        return None
    kind = "extended" if "EXTENDED" in m.group(1).upper() else m.group(1).lower()
    schema = m.group(2).split(".")[-1].strip("`") if m.group(2) else None
    return ShowRelations(kind, schema, m.group(3))


def split_statements(sql: str) -> list[str]:
    """The statements of a text, split at top-level semicolons (comments and strings respected)."""
    try:
        tokens = sqlglot.tokenize(sql, read="spark")
    except (TokenError, ValueError):
        return [sql]
    parts, start = [], 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            parts.append(sql[start:tok.start])
            start = tok.end + 1
    parts.append(sql[start:])
    return [p for p in parts if _has_tokens(p)]


def _has_tokens(sql: str) -> bool:
    try:
        return bool(sqlglot.tokenize(sql, read="spark"))
    except (TokenError, ValueError):
        return bool(sql.strip())


def route(sql: str) -> Statement:
    """Classify one statement."""
    head = _first_words(sql)
    if head[:1] in (["begin"], ["start"]) and (len(head) == 1 or head[1] in ("transaction", "work")):
        return TransactionControl("begin")
    if head[:1] in (["commit"], ["end"]):
        return TransactionControl("commit")
    if head[:1] == ["rollback"] or head[:1] == ["abort"]:
        return TransactionControl("rollback")
    if head[:1] == ["show"]:
        show = _show(sql)
        if show is not None:
            return show
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except (ParseError, TokenError, ValueError):
        return Passthrough(sql, frozenset())
    refs = _refs(tree)
    temp = _temp_view(sql, tree, refs)
    if temp is not None:
        return temp
    change = _change(sql, tree, _refs(tree, skip=written_target(tree)))
    return change if change is not None else Passthrough(sql, refs)


def _temp_view(sql: str, tree: exp.Expr, refs: frozenset[tuple[str, str]]) -> TempView | None:
    """A plain CREATE [OR REPLACE] TEMPORARY VIEW name AS query (no column list, no options), else None."""
    if not isinstance(tree, exp.Create) or (tree.args.get("kind") or "").upper() != "VIEW":
        return None
    props = tree.args.get("properties")
    if not props or [type(p) for p in props.expressions] != [exp.TemporaryProperty]:
        return None
    if not isinstance(tree.this, exp.Table) or tree.this.db or tree.args.get("exists"):
        return None
    query = _query_text(sql, _name_end(sql, tree.this.name), (TokenType.ALIAS,))
    if not query:
        return None
    return TempView(tree.this.name, query, bool(tree.args.get("replace")), refs)


def _first_words(sql: str) -> list[str]:
    try:
        toks = sqlglot.tokenize(sql, read="spark")
    except (TokenError, ValueError):
        return []
    return [t.text.lower() for t in toks[:2]]


def _refs(tree: exp.Expr, skip: exp.Expr | None = None) -> frozenset[tuple[str, str]]:
    # a bare name is ("", name): it means the profile's schema, if the lake has it there (see LakeNames.refresh)
    return frozenset(((t.db or "").lower(), t.name.lower()) for t in tree.find_all(exp.Table)
                     if t.name and t is not skip)


def written_target(tree: exp.Expr) -> exp.Expr | None:
    """The table node a statement writes (INSERT, DELETE, UPDATE, MERGE, CREATE): not a read. The Spark layer reads
    a DML target through its own scan, so its Spark view need not be brought up to date (a CREATE VIEW analysis);
    a read of it elsewhere in the statement is another node and still counts."""
    if isinstance(tree, (exp.Insert, exp.Delete, exp.Update, exp.Merge, exp.Create)):
        node = tree.this
        while isinstance(node, exp.Schema):
            node = node.this
        return node if isinstance(node, exp.Table) else None
    return None


def _target(node: exp.Expr | None) -> tuple[str | None, str | None]:
    while isinstance(node, exp.Schema):
        node = node.this
    if isinstance(node, exp.Table):
        return (node.db or None), node.name
    return None, None


def _schema_name(node: exp.Expr | None) -> str:
    if isinstance(node, exp.Table):
        return node.db or node.name
    return node.name if node is not None else ""


_STRING_TYPES = {exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR, exp.DataType.Type.TEXT,
                 exp.DataType.Type.NVARCHAR, exp.DataType.Type.NCHAR}


def _type_sql(kind: exp.Expr | None) -> str | None:
    """A column type as Spark's schema parser takes it: DuckLake strings have no length and Spark schemas refuse
    CHAR/VARCHAR, so those are STRING."""
    if kind is None:
        return None
    if isinstance(kind, exp.DataType):
        kind = kind.copy()
        for node in [kind, *kind.find_all(exp.DataType)]:
            if node.this in _STRING_TYPES:
                node.set("this", exp.DataType.Type.TEXT)
                node.set("expressions", [])
    return kind.sql(dialect="spark")


def _column_ddl(c: exp.ColumnDef) -> str:
    return f"{c.this.sql(dialect='spark')} {_type_sql(c.args.get('kind'))}"


def _spark(node: exp.Expr | None) -> str | None:
    return None if node is None else _sql(node)


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="spark")


def _query_text(sql: str, start_after: int, kinds: tuple[TokenType, ...]) -> str | None:
    """The text from the first top-level token of the given kinds after the offset (the query of CTAS/INSERT)."""
    tokens = sqlglot.tokenize(sql, read="spark")
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.token_type == TokenType.L_PAREN:
            if depth == 0 and tok.start >= start_after and TokenType.L_PAREN in kinds and _opens_query(tokens, i):
                return sql[tok.start:].strip()
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and tok.start >= start_after and tok.token_type in kinds:
            if tok.token_type == TokenType.ALIAS:
                return sql[tok.end + 1:].strip()
            return sql[tok.start:].strip()
    return None


def _opens_query(tokens: list[Token], i: int) -> bool:
    return i + 1 < len(tokens) and tokens[i + 1].token_type in (TokenType.SELECT, TokenType.WITH)


def _name_end(sql: str, name: str) -> int:
    """Offset just past the first token naming the target (where its options and its query follow)."""
    for tok in sqlglot.tokenize(sql, read="spark"):
        if tok.text.lower() == name.lower():
            return tok.end + 1
    return 0


TYPES_PROPERTY = "ducklake.types"  # 'col=uuid,col2.element=time': DuckLake types of a new table's columns
SORTED_BY_PROPERTY = "ducklake.sorted_by"  # 'a DESC NULLS FIRST, lower(b)': the table's SET SORTED BY
OPTION_PROPERTY = "ducklake.option."  # 'ducklake.option.parquet_compression' = 'zstd': a table write option


def _layout(props: list[exp.Expression]) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """The sort keys and table options of TBLPROPERTIES (SORTED_BY_PROPERTY, OPTION_PROPERTY...)."""
    sorted_by, options = None, []
    for p in props:
        if type(p) is not exp.Property:
            continue
        key = p.name.lower()
        value = p.args.get("value")
        text = value.name if isinstance(value, exp.Literal) else str(value)
        if key == SORTED_BY_PROPERTY:
            sorted_by = text.strip()
        elif key.startswith(OPTION_PROPERTY):
            options.append((key[len(OPTION_PROPERTY):], text))
    return sorted_by, tuple(options)


def _types(text: str) -> tuple[tuple[str, str], ...]:
    """The (column path, type) pairs of a TYPES_PROPERTY value.

    Raises:
        RoutingError: an entry is not path=type.
    """
    out = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        path, sep, type_ = item.rpartition("=")
        if not sep or not path.strip() or not type_.strip():
            raise RoutingError(f"{TYPES_PROPERTY}: expected column=type entries separated by commas, got {item!r}")
        out.append((path.strip(), type_.strip()))
    return tuple(out)


def _alter_types(tree: exp.Alter) -> tuple[tuple[str, str], ...]:
    """The DuckLake types of added columns: `ALTER TABLE t ADD COLUMNS (...) TBLPROPERTIES ('ducklake.types' = ...)`
    (how the incremental materialization's on_schema_change applies the model's ducklake_types)."""
    for p in tree.args.get("options") or []:
        if type(p) is exp.Property and p.name.lower() == TYPES_PROPERTY:
            value = p.args.get("value")
            return _types(value.name if isinstance(value, exp.Literal) else str(value))
    return ()


def _properties(tree: exp.Create) -> tuple[tuple[str, ...], str | None, bool, tuple[tuple[str, str], ...]]:
    parts: tuple[str, ...] = ()
    comment = None
    temporary = False
    types: tuple[tuple[str, str], ...] = ()
    props = tree.args.get("properties")
    for p in props.expressions if props else []:
        if isinstance(p, exp.PartitionedByProperty):
            inner = p.this
            cols = inner.expressions if isinstance(inner, (exp.Schema, exp.Tuple)) else [inner]
            parts = tuple(c.sql(dialect="spark") if not isinstance(c, exp.Column) else c.name for c in cols)
        elif isinstance(p, exp.SchemaCommentProperty):
            comment = p.this.name if isinstance(p.this, exp.Literal) else _spark(p.this)
        elif isinstance(p, exp.TemporaryProperty):
            temporary = True
        elif type(p) is exp.Property and p.name.lower() == TYPES_PROPERTY:
            value = p.args.get("value")
            types = _types(value.name if isinstance(value, exp.Literal) else str(value))
    return parts, comment, temporary, types


def _change(sql: str, tree: exp.Expr, refs: frozenset[tuple[str, str]]) -> Change | None:
    if isinstance(tree, exp.Create):
        return _create(sql, tree, refs)
    if isinstance(tree, exp.Drop):
        kind = (tree.args.get("kind") or "").upper()
        targets = tree.args.get("tables") or [tree.this]
        if kind in ("SCHEMA", "DATABASE"):
            return DropSchema(name=_schema_name(targets[0]), if_exists=bool(tree.args.get("exists")),
                              cascade=bool(tree.args.get("cascade")))
        if len(targets) != 1:
            raise RoutingError(f"DROP {kind} of several objects at once is not supported: drop them one by one")
        schema, name = _target(targets[0])
        if kind in ("TABLE", "VIEW") and schema and name:
            drop = DropTable if kind == "TABLE" else DropView
            return drop(schema=schema, name=name, if_exists=bool(tree.args.get("exists")))
        return None
    if isinstance(tree, exp.Insert):
        schema, name = _target(tree.this)
        if not schema or name is None:
            return None
        cols = tuple(c.name for c in tree.this.expressions) if isinstance(tree.this, exp.Schema) else ()
        query = _query_text(sql, _name_end(sql, name),
                            (TokenType.SELECT, TokenType.WITH, TokenType.VALUES, TokenType.FROM, TokenType.L_PAREN))
        if query is None:
            raise RoutingError(f"INSERT into {schema}.{name}: no query or VALUES found")
        table = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        part = table.args.get("partition")
        partition: tuple[str, ...] = ()
        if isinstance(part, exp.Partition):
            if any(not isinstance(e, exp.Column) for e in part.expressions):
                raise RoutingError(f"INSERT into {schema}.{name}: static PARTITION values are not supported; "
                                   "select the partition columns in the query (dynamic partitions) instead")
            partition = tuple(e.name for e in part.expressions)
        insert = InsertOverwrite if tree.args.get("overwrite") else Insert
        return insert(schema=schema, name=name, query=query, columns=cols, partition_by=partition, refs=refs)
    if isinstance(tree, exp.Delete):
        schema, name = _target(tree.this)
        if not schema or not name:
            return None
        where = tree.args.get("where")
        if where is not None:
            _requalify(where, {(tree.this.alias or "").lower(), name.lower()} - {""}, "t")
        return Delete(schema=schema, name=name, condition=_spark(where.this) if where else None, refs=refs)
    if isinstance(tree, exp.Update):
        schema, name = _target(tree.this)
        if not schema or not name:
            return None
        sets = {eq.this.name: _sql(eq.expression) for eq in tree.expressions}
        where = tree.args.get("where")
        return Update(schema=schema, name=name, assignments=sets, condition=_spark(where.this) if where else None,
                      refs=refs)
    if isinstance(tree, exp.TruncateTable):
        schema, name = _target(tree.expressions[0]) if tree.expressions else (None, None)
        return Truncate(schema=schema, name=name) if schema and name else None
    if isinstance(tree, exp.Merge):
        return _merge(tree, refs)
    if isinstance(tree, exp.Alter):
        return _alter(tree)
    if isinstance(tree, exp.Comment):
        return _comment(tree)
    return None


def _create(sql: str, tree: exp.Create, refs: frozenset[tuple[str, str]]) -> Change | None:
    kind = (tree.args.get("kind") or "").upper()
    if kind in ("SCHEMA", "DATABASE"):
        return CreateSchema(name=_schema_name(tree.this), if_not_exists=bool(tree.args.get("exists")))
    partition, comment, temporary, types = _properties(tree)
    props = tree.args.get("properties")
    sorted_by, table_options = _layout(props.expressions if props else [])
    schema, name = _target(tree.this)
    if temporary or not schema or name is None:
        return None
    replace = bool(tree.args.get("replace"))
    if_not_exists = bool(tree.args.get("exists"))
    if kind == "VIEW":
        query = _query_text(sql, _name_end(sql, name), (TokenType.ALIAS,)) or ""
        return CreateView(schema=schema, name=name, query=query, replace=replace, comment=comment,
                          if_not_exists=if_not_exists, refs=refs)
    if kind != "TABLE":
        return None
    clone = tree.args.get("clone")
    if clone is not None:  # CREATE [OR REPLACE] TABLE t [SHALLOW] CLONE s.source (Delta's syntax; see apply)
        source_schema, source = _target(clone.this)
        if not source_schema or source is None:
            raise RoutingError(f"CREATE TABLE {schema}.{name} CLONE needs a two-part source name (schema.table)")
        return Clone(schema=schema, name=name, source=(source_schema, source), replace=replace,
                     if_not_exists=if_not_exists, refs=refs)
    columns_ddl = None
    not_null: tuple[str, ...] = ()
    if isinstance(tree.this, exp.Schema) and tree.this.expressions:
        defs = [c for c in tree.this.expressions if isinstance(c, exp.ColumnDef)]
        # the column list's types only (constraints other than NOT NULL are not enforced by DuckLake)
        columns_ddl = ", ".join(_column_ddl(c) for c in defs if c.args.get("kind") is not None) or None
        not_null = tuple(c.name for c in defs if any(
            isinstance(k.kind, exp.NotNullColumnConstraint) and not k.kind.args.get("allow_null")
            for k in c.constraints))
    if tree.expression is not None:
        # the column list's types are not applied: the query's columns are the table's
        query = _query_text(sql, _name_end(sql, name), (TokenType.ALIAS,)) or ""
        return Ctas(schema=schema, name=name, query=query, replace=replace, if_not_exists=if_not_exists,
                    comment=comment, partition_by=partition, not_null=not_null, types=types, refs=refs,
                    sorted_by=sorted_by, table_options=table_options)
    if columns_ddl is None:
        raise RoutingError(f"CREATE TABLE {schema}.{name} needs columns or AS SELECT")
    return CreateTable(schema=schema, name=name, columns_ddl=columns_ddl, replace=replace, if_not_exists=if_not_exists,
                       comment=comment, partition_by=partition, not_null=not_null, types=types, sorted_by=sorted_by,
                       table_options=table_options)


def _merge(tree: exp.Merge, refs: frozenset[tuple[str, str]]) -> Merge:
    schema, name = _target(tree.this)
    if not schema or not name:
        raise RoutingError("MERGE INTO needs a two-part target name (schema.table)")
    t_alias = tree.this.alias or name
    using = tree.args["using"]
    s_alias = using.alias or (using.name if isinstance(using, exp.Table) else "s")
    # conditions and expressions are rendered with the target as `t` and the source as `s`, as the Spark layer reads
    inside_source = {id(c) for c in using.find_all(exp.Column)}
    for col in list(tree.find_all(exp.Column)):
        q = (col.table or "").lower()
        if id(col) in inside_source or not q:
            continue
        if q == (t_alias or "").lower():
            col.set("table", exp.to_identifier("t"))
        elif q == (s_alias or "").lower():
            col.set("table", exp.to_identifier("s"))
    if isinstance(using, exp.Table):
        source = exp.Table(this=using.this, db=using.args.get("db")).sql(dialect="spark")
    else:
        source = (using.this if isinstance(using, exp.Subquery) else using).sql(dialect="spark")
    clauses = []
    whens = tree.args.get("whens")
    for w in (whens.expressions if whens is not None else tree.expressions):
        matched = bool(w.args.get("matched"))
        by_source = bool(w.args.get("source"))
        when = "matched" if matched else ("not_matched_by_source" if by_source else "not_matched")
        cond = _spark(w.args.get("condition"))
        then = w.args.get("then")
        if isinstance(then, exp.Update):
            sets = None if not then.expressions or isinstance(then.expressions[0], exp.Star) else {
                eq.this.name: _sql(eq.expression) for eq in then.expressions}
            clauses.append(MergeClause(when, "update", cond, sets))
        elif isinstance(then, exp.Insert):
            cols = tuple(c.name for c in then.this.expressions) if isinstance(then.this, exp.Tuple) else ()
            vals = tuple(_spark(v) or "" for v in then.expression.expressions) if isinstance(
                then.expression, exp.Tuple) else ()
            clauses.append(MergeClause(when, "insert", cond, None, cols, vals))
        elif isinstance(then, exp.Var) and then.name.upper() == "DELETE" or (
                isinstance(then, exp.Expr) and then.sql().upper() == "DELETE"):
            clauses.append(MergeClause(when, "delete", cond))
        elif isinstance(then, exp.Star) or (then is not None and then.sql().upper().startswith("INSERT")):
            clauses.append(MergeClause(when, "insert", cond))
        else:
            raise RoutingError(f"MERGE INTO {schema}.{name}: unsupported clause {w.sql(dialect='spark')!r}")
    return Merge(schema=schema, name=name, source=source, on=_spark(tree.args.get("on")), clauses=tuple(clauses),
                 refs=refs)


def _requalify(tree: exp.Expr, names: set[str], to: str) -> None:
    """Columns qualified by the DML target's alias or name are rendered as `to`.col (the Spark layer reads the
    target as `t`); a column qualified by schema.table loses the schema."""
    for col in list(tree.find_all(exp.Column)):
        if (col.table or "").lower() in names:
            col.set("table", exp.to_identifier(to))
            col.set("db", None)
            col.set("catalog", None)


def _alter(tree: exp.Alter) -> Change | None:
    schema, name = _target(tree.this)
    kind = (tree.args.get("kind") or "").upper()
    if not schema or not name or kind not in ("TABLE", "VIEW"):
        return None
    actions = tree.args.get("actions") or []
    if not actions:
        return None
    if len(actions) > 1 and not all(isinstance(x, exp.ColumnDef) for x in actions):
        return _several(tree, kind, schema, name, actions)
    a = actions[0]
    if isinstance(a, exp.AlterRename):
        _new_schema, new_name = _target(a.this)
        return Rename(schema=schema, name=name, new_name=new_name or "")
    if isinstance(a, exp.ColumnDef | exp.Schema):
        defs = [x for x in (a.expressions if isinstance(a, exp.Schema) else actions) if isinstance(x, exp.ColumnDef)]
        return _add_columns(tree, schema, name, defs)
    if isinstance(a, exp.RenameColumn):
        return ColumnPathChange(schema=schema, name=name, action="rename", path=_path(a.this),
                                new_name=a.args["to"].name)
    if isinstance(a, exp.AlterColumn):
        col = a.this.name
        if a.args.get("comment") is not None:
            c = a.args["comment"]
            return Comment(schema=schema, name=name, column=col, text=c.name if isinstance(c, exp.Literal) else None)
        if a.args.get("dtype") is not None:
            return AlterType(schema=schema, name=name, column=col, new_type=_type_sql(a.args["dtype"]) or "")
        if a.args.get("allow_null") is not None:
            return SetNullable(schema=schema, name=name, column=col, nullable=bool(a.args["allow_null"]))
        return None
    if isinstance(a, exp.Drop) and (a.args.get("kind") or "").upper() in ("COLUMN", "COLUMNS"):
        cols = [c for t in (a.args.get("tables") or [a.this])  # DROP COLUMNS (a, b): a Schema of names
                for c in (t.expressions if isinstance(t, exp.Schema) else [t])]
        drops = tuple(DropColumn(schema=schema, name=name, column=c.name, if_exists=bool(a.args.get("exists")))
                      if len(_path(c)) == 1 else ColumnPathChange(schema=schema, name=name, action="drop", path=_path(c))
                      for c in cols)
        return drops[0] if len(drops) == 1 else Alter(schema=schema, name=name, actions=drops)
    if isinstance(a, (exp.AlterSet,)):
        props = [p for x in a.expressions if isinstance(x, exp.Properties) for p in x.expressions]
        sorted_by, table_options = _layout(props)
        if kind == "TABLE" and (sorted_by is not None or table_options):
            return SetLayout(schema=schema, name=name, sorted_by=sorted_by, table_options=table_options)
        return Noop(schema=schema, name=name)  # TBLPROPERTIES etc.: Spark-catalog settings with no DuckLake meaning
    return None


def _path(node: exp.Expr) -> tuple[str, ...]:
    """The parts of a column name: `c`, or `s.f` / `l.element.f` for a field of a nested column."""
    if isinstance(node, exp.Dot):
        return (*_path(node.this), node.expression.name)
    if isinstance(node, exp.Column):
        return tuple(p.name for p in node.parts)
    return (node.name,)


def _add_columns(tree: exp.Alter, schema: str, name: str, defs: list[exp.ColumnDef]) -> Change:
    """ADD COLUMNS: new top-level columns (one AddColumns), then fields of nested columns (one change each)."""
    top = [d for d in defs if len(_path(d.this)) == 1]
    fields = [ColumnPathChange(schema=schema, name=name, action="add", path=_path(d.this),
                               type_ddl=_type_sql(d.args.get("kind")) or "") for d in defs if len(_path(d.this)) > 1]
    parts: list[Change] = []
    if top:
        ddl = ", ".join(_column_ddl(x) for x in top)
        parts.append(AddColumns(schema=schema, name=name, columns_ddl=ddl, types=_alter_types(tree)))
    parts += fields
    return parts[0] if len(parts) == 1 else Alter(schema=schema, name=name, actions=tuple(parts))


def _several(tree: exp.Alter, kind: str, schema: str, name: str, actions: list[exp.Expr]) -> Alter:
    """An ALTER with several actions (ADD COLUMN a, DROP COLUMN b, ...): each action routed as its own ALTER, applied
    in order in one unit of work.

    Raises:
        RoutingError: an action the adapter cannot apply (rather than applying only the others).
    """
    parts: list[Change] = []
    for action in actions:
        one = tree.copy()
        one.set("actions", [action.copy()])
        change = _alter(one)
        if change is None:
            raise RoutingError(f"ALTER {kind} {schema}.{name}: the action {action.sql(dialect='spark')!r} is not "
                               "supported on a DuckLake table")
        parts.extend(change.actions if isinstance(change, Alter) else (change,))
    return Alter(schema=schema, name=name, actions=tuple(parts))


def _comment(tree: exp.Comment) -> Change | None:
    kind = (tree.args.get("kind") or "").upper()
    text = tree.expression.name if isinstance(tree.expression, exp.Literal) else None
    if kind == "COLUMN":
        col = tree.this
        parts = [p.name for p in col.parts] if isinstance(col, exp.Column) else []
        if len(parts) < 3:
            raise RoutingError(f"COMMENT ON COLUMN needs schema.table.column, got {col.sql(dialect='spark')!r}")
        return Comment(schema=parts[-3], name=parts[-2], column=parts[-1], text=text)
    schema, name = _target(tree.this)
    if not schema or not name or kind not in ("TABLE", "VIEW"):
        return None
    return Comment(schema=schema, name=name, text=text)
