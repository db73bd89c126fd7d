"""Passes over large arrays split across the cores this process may use.

numpy lets go of the interpreter inside a pass over an array, so threads that
run passes over separate parts of the data run side by side: on two cores two
parts take about half the time. What the parts give is put together in a
fixed order (counts added as integers, pieces taken in row order), so the
result is the same to the bit however many cores there are.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

__all__ = ["Parts", "cores", "in_order"]

T = TypeVar("T")
R = TypeVar("R")

#: At most this many threads, however many cores there are (the passes are bound by memory well before).
MAX_THREADS = 8
#: Values a part holds at least: a smaller part gains less than a thread costs.
PART_VALUES = 1 << 20


def cores() -> int:
    """The cores this process may run on (its affinity where the system has one), at most ``MAX_THREADS``."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(n, MAX_THREADS))


class Parts:
    """``n`` items (universes) in contiguous parts, one per core, each of at least ``PART_VALUES`` values
    (``per_item`` values an item), worked on side by side in threads: ``with Parts(n, per_item) as parts:
    parts.map(work)``."""

    def __init__(self, n: int, per_item: int) -> None:
        count = max(1, min(cores(), n * per_item // PART_VALUES))
        edges = np.linspace(0, n, count + 1).astype(int).tolist()
        self.slices = [slice(a, b) for a, b in itertools.pairwise(edges)]
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> Parts:
        if len(self.slices) > 1:
            self._pool = ThreadPoolExecutor(len(self.slices), thread_name_prefix="multiverse-parts")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown()

    def map(self, work: Callable[[slice], R]) -> list[R]:
        """``work`` of each part, in the parts' order."""
        if self._pool is None:
            return [work(part) for part in self.slices]
        return list(self._pool.map(work, self.slices))


def in_order(work: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """``work(item)`` of each item, in the items' order, computed up to one item a core ahead in threads:
    a pass piece by piece keeps its pieces' temporaries small and still uses every core. Only a few
    results are held at a time; an error of one is raised when its turn comes."""
    n = cores()
    if n == 1:
        yield from map(work, items)
        return
    with ThreadPoolExecutor(n, thread_name_prefix="multiverse-pieces") as pool:
        pending: deque[Future[Any]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(work, item))
                if len(pending) > n:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
