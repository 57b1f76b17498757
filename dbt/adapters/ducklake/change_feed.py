"""Change-feed incremental models: the rows of an upstream DuckLake table changed since the snapshot a model last
consumed, and the cursor committed with the model's own data."""

from __future__ import annotations

# The column ducklake_changes() adds to the upstream's rows; the strategies read it and never store it.
CHANGE_TYPE_COLUMN = "_ducklake_change_type"
