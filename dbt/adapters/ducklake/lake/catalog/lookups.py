"""Finding a catalog's schemas, tables and views by name or id, as DuckDB resolves identifiers (exact, then
case-insensitive). One implementation for the two holders of a catalog's objects: a state at a snapshot
(`LakeState`) and a commit's working catalog (`CatalogView`); a transaction and a unit of work look up through the
working catalog they hold."""

from __future__ import annotations

from typing import Any

from ..errors import NoSuchSchemaError, NoSuchTableError
from ..records import SchemaInfo, TableInfo, ViewInfo


def ci_lookup(d: dict[Any, Any], key: Any) -> Any:
    """Exact, then case-insensitive lookup of a name (or (schema, name)), as DuckDB resolves identifiers."""
    if key in d:
        return d[key]
    low = tuple(k.lower() for k in key) if isinstance(key, tuple) else key.lower()
    for k, v in d.items():
        kl = tuple(x.lower() for x in k) if isinstance(k, tuple) else k.lower()
        if kl == low:
            return v
    return None


class CatalogObjects:
    """The lookups of a holder of `schemas` (by name), `tables` and `views` (by (schema, name)). A holder says where
    its objects are in its errors (`where`: a state names its snapshot) and may refuse a name it cannot serve before
    an object is reported missing (`check_schema_name`)."""

    schemas: dict[str, SchemaInfo]
    tables: dict[tuple[str, str], TableInfo]
    views: dict[tuple[str, str], ViewInfo]
    MISSING_ID_HINT = ""  # said after a table id that is not found

    def where(self) -> str:
        """Said after "does not exist" in a lookup's error (e.g. " at snapshot 7")."""
        return ""

    def check_schema_name(self, schema: str) -> None:
        """Called before a lookup in `schema` reports a missing object: raises for names the holder cannot serve."""

    def schema(self, name: str) -> SchemaInfo:
        """The schema with this name. Raises NoSuchSchemaError."""
        found = ci_lookup(self.schemas, name)
        if found is None:
            self.check_schema_name(name)
            raise NoSuchSchemaError(f"schema {name!r} does not exist{self.where()}")
        return found

    def table(self, schema: str, name: str) -> TableInfo:
        """The table schema.name. Raises NoSuchTableError."""
        found = ci_lookup(self.tables, (schema, name))
        if found is None:
            self.check_schema_name(schema)
            raise NoSuchTableError(f"table {schema}.{name} does not exist{self.where()}")
        return found

    def view(self, schema: str, name: str) -> ViewInfo:
        """The view schema.name. Raises NoSuchTableError."""
        found = ci_lookup(self.views, (schema, name))
        if found is None:
            self.check_schema_name(schema)
            raise NoSuchTableError(f"view {schema}.{name} does not exist{self.where()}")
        return found

    def table_by_id(self, table_id: int) -> TableInfo:
        for t in self.tables.values():
            if t.table_id == table_id:
                return t
        raise NoSuchTableError(f"table id {table_id} does not exist{self.where()}{self.MISSING_ID_HINT}")

    def schema_by_id(self, schema_id: int) -> SchemaInfo:
        for s in self.schemas.values():
            if s.schema_id == schema_id:
                return s
        raise NoSuchSchemaError(f"schema id {schema_id} does not exist{self.where()}")

    def find_relation(self, schema: str, name: str) -> TableInfo | ViewInfo | None:
        """A table or a view by name, or None."""
        return (self.tables.get((schema, name)) or self.views.get((schema, name))
                or ci_lookup(self.tables, (schema, name)) or ci_lookup(self.views, (schema, name)))
