"""The package's imports, read from its source (ast): folders are layers that import only the folders below them
(LAYERS), no module imports itself back through others (an import circle), and no module reaches into another one's
private (`_name`) names.

Counted: every import, at a module's top, inside a function (a function-level import does not break a circle, it only
hides it) and under `if TYPE_CHECKING:` (a type-only import still ties the two modules' designs together).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "dbt.adapters.ducklake"
ROOT = Path(__file__).resolve().parents[1] / "dbt" / "adapters" / "ducklake"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([PACKAGE, *parts])] = path
    return out


MODULES = _modules()

# Each folder and the folders it may import, lowest first. A folder's own modules import each other freely;
# `lake` is the format layer's top-level modules (errors, records, types, paths, storage, ...), `lake.lake` its facade,
# `spark` the Spark layer's shared types at its top, `adapter` the dbt adapter's modules.
LAYERS: dict[str, set[str]] = {
    "lake": set(),
    "lake.catalog": {"lake"},
    "lake.read": {"lake", "lake.catalog"},
    "lake.write": {"lake", "lake.catalog", "lake.read"},
    "lake.maintenance": {"lake", "lake.catalog", "lake.read", "lake.write"},
    "lake.lake_cache": {"lake", "lake.catalog", "lake.read", "lake.write"},
    "lake.lake": {"lake", "lake.catalog", "lake.read", "lake.write", "lake.maintenance", "lake.lake_cache"},
    "spark": {"lake", "lake.catalog", "lake.read", "lake.write", "lake.maintenance", "lake.lake_cache", "lake.lake"},
    "spark.env": {"spark"},
    "spark.read": {"spark", "spark.env"},
    "spark.answer": {"spark", "spark.env", "spark.read"},
    "spark.write": {"spark", "spark.env", "spark.read"},
    "adapter": {"spark", "spark.env", "spark.read", "spark.answer", "spark.write"},
}
for _layer in ("spark.env", "spark.read", "spark.answer", "spark.write", "adapter"):
    LAYERS[_layer] |= LAYERS["spark"]  # every Spark folder and the adapter may use the whole format layer

# Known exceptions, each of which must still occur (take a fixed one off the list).
KNOWN_CIRCLES: list[list[str]] = []
KNOWN_LAYER_BREACHES: set[str] = set()
KNOWN_PRIVATE_IMPORTS: set[str] = set()


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement (any depth, `if TYPE_CHECKING:` blocks included)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _base(module: str, node: ast.ImportFrom) -> str:
    """The absolute module name an ImportFrom reads from."""
    if not node.level:
        return node.module or ""
    is_package = MODULES[module].name == "__init__.py"
    parts = module.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


def _edges(module: str) -> Iterator[tuple[str, ast.Import | ast.ImportFrom, str | None]]:
    """(imported module, statement, name) for every import of a package module; name is the imported name of a
    `from m import name` that is not itself a module."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, node, None
            continue
        base = _base(module, node)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if sub in MODULES:
                yield sub, node, None
            elif base in MODULES:
                yield base, node, alias.name


def _graph() -> dict[str, set[str]]:
    return {m: {target for target, _, _ in _edges(m) if target != m} for m in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


def test_no_import_circles() -> None:
    cycles = [[_short(m) for m in c] for c in _cycles(_graph())]
    new = [c for c in cycles if c not in KNOWN_CIRCLES]
    assert not new, "import circles:\n" + "\n".join(" <-> ".join(c) for c in new)
    assert [c for c in KNOWN_CIRCLES if c not in cycles] == [], "gone: take it off KNOWN_CIRCLES"


def _layer(module: str) -> str:
    parts = _short(module).split(".")
    if parts == ["lake"]:
        return "lake.lake"  # the package's __init__ re-exports the facade
    if parts[0] == "lake":
        if len(parts) > 1 and parts[1] in ("catalog", "read", "write", "maintenance", "lake_cache", "lake"):
            return f"lake.{parts[1]}"
        return "lake"
    if parts[0] == "spark":
        return f"spark.{parts[1]}" if len(parts) > 1 and parts[1] in ("env", "read", "answer", "write") else "spark"
    return "adapter"


def test_folders_import_only_the_layers_below() -> None:
    graph = _graph()
    assert {_layer(m) for m in graph} == set(LAYERS), "a folder with no place in LAYERS"
    found = {f"{_short(m)} -> {_short(t)}" for m, targets in graph.items() for t in targets
             if _layer(t) != _layer(m) and _layer(t) not in LAYERS[_layer(m)]}
    new = sorted(found - KNOWN_LAYER_BREACHES)
    assert not new, "imports against the direction of the layers:\n" + "\n".join(new)
    assert not KNOWN_LAYER_BREACHES - found, f"gone: take {sorted(KNOWN_LAYER_BREACHES - found)} off KNOWN_LAYER_BREACHES"


def test_no_private_names_imported_from_other_modules() -> None:
    found = {}
    for module in MODULES:
        for target, node, name in _edges(module):
            if name is not None and name.startswith("_") and not name.startswith("__") and target != module:
                found[f"{_short(module)} imports {name} from {_short(target)}"] = node.lineno
    new = [f"{k} (line {n})" for k, n in found.items() if k not in KNOWN_PRIVATE_IMPORTS]
    assert not new, "private names imported across modules:\n" + "\n".join(new)
    assert set(found) >= KNOWN_PRIVATE_IMPORTS, "gone: take it off KNOWN_PRIVATE_IMPORTS"


def test_no_private_attributes_of_other_modules() -> None:
    """`module._name` where module is another package module imported by name (`from . import ops; ops._x`)."""
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        aliases = {}
        for target, node, name in _edges(module):
            if name is None:
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[-1]] = target
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{_short(module)}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not found, "private names of other modules used:\n" + "\n".join(found)


def _private_members() -> set[str]:
    """Private names the package defines on its classes and objects (methods, `self._x = ...` attributes)."""
    names = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                names |= {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id == "self"):
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_private_members_of_other_objects() -> None:
    """`obj._name` of a private method or attribute the package defines, on anything but self or cls, and writes
    into an object's `__dict__`: a module working on another's internals."""
    private = _private_members()
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Attribute):
                continue
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if (node.attr in private and not own) or node.attr == "__dict__":
                found.append(f"{_short(module)}:{node.lineno} uses {ast.unparse(node)}")
    assert not found, "private members of other objects used:\n" + "\n".join(found)


def test_the_walker_sees_the_package() -> None:
    graph = _graph()
    assert f"{PACKAGE}.lake.write.transaction" in graph[f"{PACKAGE}.spark.write.work"]
    assert f"{PACKAGE}.lake.write.transaction" in graph[f"{PACKAGE}.spark.write.staged_reads"]  # a protocol's type
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_class_name_defined_twice() -> None:
    """One class per name in the package: two classes of one name (a statement and an operation) read as one."""
    where: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(_short(module))
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, "class names defined more than once:\n" + "\n".join(f"{n}: {', '.join(p)}" for n, p in twice.items())
