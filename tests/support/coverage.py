"""How much of the slow test matrices a run covers.

The default run (CI, `scripts/test.sh`) takes a subset of each large matrix (scenario x catalog backend x reader) that
still reaches every scenario and every backend or reader at least once; `DUCKLAKE_TEST_FULL=1` runs every
combination and the full-size cases (before a release, or after changing the read path or the catalog SQL).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

A = TypeVar("A")
B = TypeVar("B")

FULL = os.environ.get("DUCKLAKE_TEST_FULL", "") not in ("", "0")


def pairs(firsts: Sequence[A], seconds: Sequence[B], per_first: int = 1) -> list[tuple[A, B]]:
    """Every (a, b) under FULL; otherwise each a with `per_first` of the b's, taken in turn, so every b still occurs
    (when there are at least as many a's as b's)."""
    if FULL:
        return [(a, b) for a in firsts for b in seconds]
    out = []
    for i, a in enumerate(firsts):
        for k in range(min(per_first, len(seconds))):
            out.append((a, seconds[(i * per_first + k) % len(seconds)]))
    return out


def full_only(why: str) -> pytest.MarkDecorator:
    """Skip a test outside the full run; `why` says what covers its ground by default (or why it can wait)."""
    return pytest.mark.skipif(not FULL, reason=f"{why} (the full suite: DUCKLAKE_TEST_FULL=1)")


def full_only_tests(why: str, *names: str) -> Callable[[type], type]:
    """A class decorator: the named test methods (inherited from a suite's base class) run in the full run only.
    Each becomes a method of its own on the class, so the base class and its other subclasses keep theirs."""

    def wrap(cls: type) -> type:
        for name in names:
            inherited = getattr(cls, name)

            def method(self: Any, project: Any, _inherited: Any = inherited) -> None:
                _inherited(self, project)

            method.__name__ = method.__qualname__ = name
            method.__doc__ = inherited.__doc__
            setattr(cls, name, full_only(why)(method))
        return cls

    return wrap
