"""Where a stage's units are computed: the one seam the three backends of a run share.

A run names its backend with a string (``run(..., backend="local")``); the
executor (:mod:`multiverse.engine._executor`) maps it once to a class that
meets :class:`Backend`: :class:`~multiverse.engine._backend_threads.LocalThreads`
(daemon threads in this process),
:class:`~multiverse.engine._backend_processes.Processes` (worker processes on
this machine) or :class:`~multiverse.engine._backend_dask.Dask` (a Dask
cluster). The executor keeps the run's bookkeeping (what was computed, what
failed, the claims held, the progress bar); a backend only computes units and
says how each ended.

The local backends claim each unit in the store before computing it; a unit
another run holds is waited for (:func:`wait_for_claimed`), never paid twice.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from multiverse.core import interrupt
from multiverse.engine._processes import NOT_STARTED
from multiverse.store import Held, Store

__all__ = ["CLAIMED", "ELSEWHERE", "NOT_STARTED", "POLL", "Backend", "Outcome", "StageRun", "wait_for_claimed"]

#: a unit another run holds the claim of: waited for, not computed
CLAIMED = "claimed by another run"
#: a unit another run stored while this one waited or claimed: neither computed nor failed here
ELSEWHERE = "computed by another run"
#: seconds between looks at a queue, a pool or a cluster, so a stop is noticed soon
POLL = 0.1

#: how one unit ended: (its key, None when computed and stored, else a failure reason or ELSEWHERE)
Outcome = tuple[str, str | None]


@dataclass(frozen=True)
class StageRun:
    """One stage's units as a backend sees them, with the run's store, its claims and the stop grace."""

    stage: str
    units: list[Any]
    upstream: Callable[[Any], Any]
    store: Store
    claims: Held
    #: seconds the units in flight get to finish and be stored after a stop
    grace: float


class Backend(Protocol):
    """Computes a stage's units and reports how each ended.

    Entered once for the whole run: a cluster or the worker processes start
    and end with it. ``outcomes`` yields an :data:`Outcome` per unit as it
    ends; on a stop it gives the units in flight the stage's grace, releases
    the claims and raises :class:`~multiverse.core._interrupt.RunInterrupted`.
    The executor closes the generator and then calls ``end_stage``.
    """

    def __enter__(self) -> Backend: ...

    def __exit__(self, *exc: object) -> bool | None: ...

    def outcomes(self, stage: StageRun) -> Generator[Outcome, None, None]: ...

    def end_stage(self) -> None: ...


def wait_for_claimed(stage: StageRun, compute: Callable[[list[Any]], Iterator[tuple[Any, str | None]]]
                     ) -> Generator[Outcome, None, None]:
    """The outcomes of ``compute``, which claims each unit first; the units another run
    holds are waited for: stored there, or computed here once the claim is given up."""
    pending = list(stage.units)
    while pending:
        waiting = []
        for unit, failure in compute(pending):
            if failure is CLAIMED:
                waiting.append(unit)
            else:
                yield unit.key, failure
        # Another run is computing these: wait for its entries rather than pay twice.
        pending = []
        while waiting:
            interrupt.sleep(0.2)
            still = []
            for unit in waiting:
                if stage.store.has(stage.stage, unit.key):
                    yield unit.key, ELSEWHERE
                elif stage.store.claimed(stage.stage, unit.key):
                    still.append(unit)
                else:
                    pending.append(unit)  # it gave up or died: compute it ourselves
            waiting = still
