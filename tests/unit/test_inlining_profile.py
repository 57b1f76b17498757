"""The profile's `data_inlining_row_limit` (DuckDB's ATTACH option): accepted and refused values."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.ducklake.credentials import DuckLakeCredentials


def creds(tmp_path: Path, **kw: object) -> DuckLakeCredentials:
    return DuckLakeCredentials.from_dict({"catalog": str(tmp_path / "c.ducklake"), "data_path": str(tmp_path / "d/"),
                                          "schema": "main", **kw})


def test_limit_is_rows_or_unset(tmp_path: Path) -> None:
    assert creds(tmp_path).data_inlining_row_limit is None
    assert creds(tmp_path, data_inlining_row_limit=10).data_inlining_row_limit == 10
    assert creds(tmp_path, data_inlining_row_limit=0).data_inlining_row_limit == 0


def test_a_negative_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DbtRuntimeError, match="`data_inlining_row_limit` must be a whole number of rows"):
        creds(tmp_path, data_inlining_row_limit=-1)
