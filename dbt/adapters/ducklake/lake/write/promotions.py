"""The widening type changes the reference allows for ALTER COLUMN ... TYPE (files are not rewritten): DuckDB's
max-logical-type rule, checked against DuckDB 1.5 (tests/lake/test_promotions.py)."""

from __future__ import annotations

_SIGNED = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "int128": 128}
_UNSIGNED = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_INT_DIGITS = {"int8": 3, "int16": 5, "int32": 10, "int64": 19, "uint8": 3, "uint16": 5, "uint32": 10, "uint64": 20}


def promotion_allowed(source: str, target: str) -> bool:
    """Whether ALTER COLUMN TYPE source -> target is a widening the reference accepts (files are not rewritten)."""
    from ..types import decimal_params

    if source == target:
        return False
    if source in _SIGNED or source in _UNSIGNED:
        if target in ("float32", "float64"):
            return True
        if target in _SIGNED:
            bits = _SIGNED.get(source) or _UNSIGNED[source]
            return _SIGNED[target] > bits
        if target in _UNSIGNED:
            return source in _UNSIGNED and _UNSIGNED[target] > _UNSIGNED[source]
        if target.startswith("decimal") and source in _INT_DIGITS:
            p, s = decimal_params(target)
            return p - s >= _INT_DIGITS[source]
        return False
    if source == "float32":
        return target == "float64"
    if source.startswith("decimal"):
        if target in ("float32", "float64"):
            return True
        if target.startswith("decimal"):
            (p1, s1), (p2, s2) = decimal_params(source), decimal_params(target)
            return s2 >= s1 and p2 - s2 >= p1 - s1
        return False
    if source == "date":
        return target in ("timestamp", "timestamptz")
    return source == "timestamp" and target == "timestamptz"
