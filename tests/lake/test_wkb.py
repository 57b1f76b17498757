"""WKB -> WKT as DuckDB prints a GEOMETRY (`g::VARCHAR`): every kind, Z/M/ZM, EMPTY members, number formats."""

from __future__ import annotations

import pytest

from dbt.adapters.ducklake.lake.wkb import WKBError, to_wkt
from tests.support.reference import connect

GEOMETRIES = [
    "POINT(1 2)", "POINT(0.1 -0.0)", "POINT(1e20 1.5e-7)", "POINT(123456789.123456789 2.5)", "POINT(1e15 1e16)",
    "POINT(1e17 0.0001)", "POINT(1e-5 3.14159265358979)", "POINT EMPTY", "POINT Z EMPTY", "LINESTRING EMPTY",
    "MULTIPOINT((1 2), (3 4))", "POINT M (1 2 3)", "POINT ZM (1 2 3 4)", "LINESTRING Z (1 2 3, 4 5 6)",
    "MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5), (1 1, 2 2, 1 2, 1 1)))",
    "GEOMETRYCOLLECTION(POINT(1 2), LINESTRING(0 0, 1 1))", "GEOMETRYCOLLECTION EMPTY",
    "MULTILINESTRING((0 0, 1 1), (2 2, 3 3))", "POLYGON EMPTY", "MULTIPOINT EMPTY", "MULTIPOINT(EMPTY, 1 2)",
    "MULTILINESTRING(EMPTY, (0 0, 1 1))", "MULTIPOLYGON(EMPTY, ((0 0, 1 0, 1 1, 0 0)))",
    "GEOMETRYCOLLECTION(POINT EMPTY, GEOMETRYCOLLECTION(POINT(1 2)))", "MULTIPOINT Z (1 2 3, 4 5 6)",
]


def test_wkt_equals_duckdbs_text() -> None:
    con = connect()
    for wkt in GEOMETRIES:
        text, wkb = con.execute("SELECT g::VARCHAR, ST_AsWKB(g) FROM (SELECT ?::GEOMETRY AS g)", [wkt]).fetchone()
        assert to_wkt(wkb) == text, wkt


def test_not_wkb_fails() -> None:
    with pytest.raises(WKBError):
        to_wkt(b"\x01\x63\x00\x00\x00")
    with pytest.raises(WKBError):
        to_wkt(b"\x01\x01\x00")
