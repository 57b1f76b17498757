"""What reads a lake's states need of it: the catalog and a state at a snapshot. The facade (`DuckLake`) is one;
naming this instead of the facade keeps the folders below it."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .database import CatalogDB
    from .state import LakeState


class StateSource(Protocol):
    db: CatalogDB
    data_path: str

    def snapshot(self, version: int | None = None, *, timestamp: dt.datetime | None = None) -> LakeState:
        """The lake's state at a snapshot (the latest when none is named)."""
        ...
