"""The collector is paused inside bulk loads and its state restored after the last one ends, from any thread."""

from __future__ import annotations

import gc
import threading

from dbt.adapters.ducklake.lake.gc_pause import gc_paused


def test_nested_and_overlapping_pauses_restore_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    with gc_paused():
        t.start()
        inside.wait(10)
    assert not gc.isenabled()  # the other thread's load still runs
    leave.set()
    t.join()
    assert gc.isenabled()


def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_inside_restores_the_collector() -> None:
    try:
        with gc_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()
