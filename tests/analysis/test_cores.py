"""Passes split across cores (analysis._cores): results in order, errors at their turn, one core alike."""

from __future__ import annotations

import threading

import pytest

from multiverse.analysis._kernel import _cores


@pytest.fixture(params=[1, 2, 4], ids=["one core", "two cores", "four cores"])
def cores(request, monkeypatch):
    monkeypatch.setattr(_cores.os, "sched_getaffinity", lambda pid: set(range(request.param)), raising=False)
    monkeypatch.setattr(_cores.os, "cpu_count", lambda: request.param)
    return request.param


def test_in_order_gives_each_result_in_the_items_order_whatever_finishes_first(cores):
    # With more than one core, item 0 ends only once item 1 has: the later item finishes first
    # however fast or loaded the machine (an event, not a sleep), and only if the two run side by side.
    threads, finished = set(), []
    one_done = threading.Event()

    def work(i):
        threads.add(threading.current_thread().name)
        if i == 0 and cores > 1:
            assert one_done.wait(timeout=300), "item 1 never ran beside item 0"
        finished.append(i)
        if i == 1:
            one_done.set()
        return i * i

    assert list(_cores.in_order(work, range(40))) == [i * i for i in range(40)]
    assert (len(threads) > 1) == (cores > 1)
    assert finished.index(1) < finished.index(0) if cores > 1 else finished == list(range(40))


def test_in_order_holds_a_few_results_at_a_time(cores):
    """Items are taken only as results are handed on: about one a core ahead, never the whole input."""
    taken = []

    def items():
        for i in range(100):
            taken.append(i)
            yield i

    results = _cores.in_order(lambda i: i, items())
    for expected in range(10):
        assert next(results) == expected
        assert len(taken) <= expected + cores + 1
    results.close()


def test_an_error_of_one_item_is_raised_at_its_turn_after_the_results_before_it(cores):
    def work(i):
        if i == 5:
            raise ValueError("item 5")
        return i

    seen = []
    with pytest.raises(ValueError, match="item 5"):
        for value in _cores.in_order(work, range(20)):
            seen.append(value)
    assert seen == [0, 1, 2, 3, 4]


def test_parts_cover_the_items_once_in_order_and_only_split_what_is_worth_it(cores, monkeypatch):
    monkeypatch.setattr(_cores, "PART_VALUES", 100)
    with _cores.Parts(1003, 1) as parts:
        assert len(parts.slices) == min(cores, 10)
        assert [i for part in parts.slices for i in range(1003)[part]] == list(range(1003))
        assert parts.map(lambda part: part.stop - part.start) == [p.stop - p.start for p in parts.slices]
    assert len(_cores.Parts(99, 1).slices) == 1  # fewer values than a part holds: no thread
