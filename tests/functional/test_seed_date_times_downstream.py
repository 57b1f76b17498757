"""A lake made before seeds' zone-less date-times became TIMESTAMP keeps its column types: an incremental model whose
TIMESTAMPTZ column came from such a seed stays TIMESTAMPTZ when the re-seeded column is TIMESTAMP; its new rows are
the wall times as UTC instants (the Spark session's zone), as the seed's old values were. DuckDB reads both."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.functional.test_without_spark import _dbt, _project
from tests.support import reference
from tests.support.coverage import full_only

HEADER = "name: lazy\nversion: '1.0'\nprofile: lazy\nconfig-version: 2\n"
INCREMENTAL = """
{{ config(materialized='incremental', unique_key='id') }}
select id, at from {{ ref('events') }}
{% if is_incremental() %} where id > (select max(id) from {{ this }}) {% endif %}
"""


@pytest.mark.slow
@full_only("a lake made by an older release's seed inference: a one-time upgrade path")
def test_an_incremental_model_keeps_its_timestamptz_column_over_a_reseeded_timestamp(tmp_path: Path) -> None:
    catalog, data = f"duckdb:///{tmp_path}/l.ducklake", tmp_path / "data"
    project = _project(tmp_path / "p", catalog, data)
    (project / "seeds").mkdir()
    (project / "models" / "events_log.sql").write_text(INCREMENTAL)
    seed = project / "seeds" / "events.csv"
    seed.write_text("id,at\n1,2026-03-01 09:30:00\n")
    # the former inference, as an override: the seed and the model's column are instants
    (project / "dbt_project.yml").write_text(HEADER + "seeds:\n  lazy:\n    events:\n      +column_types: {at: timestamp}\n")
    assert _dbt(project, "seed") == {"events": ("success", None)}
    assert _dbt(project, "run", "--select", "events_log") == {"events_log": ("success", None)}

    seed.write_text("id,at\n1,2026-03-01 09:30:00\n2,2026-03-02 10:45:00\n")
    (project / "dbt_project.yml").write_text(HEADER)
    assert _dbt(project, "seed") == {"events": ("success", None)}
    assert _dbt(project, "run", "--select", "events_log") == {"events_log": ("success", None)}

    with reference.attached(catalog, read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")

        def at_type(name: str) -> str:
            return con.execute(f"SELECT column_type FROM (DESCRIBE lake.main.{name}) WHERE column_name = 'at'"
                               ).fetchone()[0]

        seed_type, model_type = at_type("events"), at_type("events_log")
        rows = con.execute('SELECT id, CAST("at" AS VARCHAR) FROM lake.main.events_log ORDER BY id').fetchall()
        hours = con.execute('SELECT hour("at") FROM lake.main.events_log ORDER BY id').fetchall()
    assert seed_type == "TIMESTAMP"
    assert model_type == "TIMESTAMP WITH TIME ZONE"
    assert rows == [(1, "2026-03-01 09:30:00+00"), (2, "2026-03-02 10:45:00+00")]
    assert hours == [(9,), (10,)]
