"""Items split into parts in which no two share a key (each item goes to the first part without its key, in order):
a part's rows are told apart by that key (the footer path's file sizes, the remote copies' file names)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")


def distinct_parts(items: Sequence[T], key: Callable[[T], Hashable]) -> list[list[T]]:
    parts: list[tuple[set[Hashable], list[T]]] = []
    for item in items:
        k = key(item)
        for seen, part in parts:
            if k not in seen:
                seen.add(k)
                part.append(item)
                break
        else:
            parts.append(({k}, [item]))
    return [part for _, part in parts]
