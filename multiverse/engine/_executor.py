"""Running one stage's work units on the run's backend, and keeping the run's books.

Each result is stored the moment it exists, so a run that stops for any
reason keeps every unit it finished. The backend (:mod:`multiverse.engine._backend`)
computes the units: threads here, worker processes, or a Dask cluster; this
module maps the run's ``backend`` name to its class once (:func:`backend_class`),
and the :class:`Executor` counts what each unit came to and holds the run's
claims, so a stop releases them all.

Stopping (``multiverse.core._interrupt``): after the first SIGINT/SIGTERM no unit
starts; units in flight get a grace period to finish and be stored; then the
claims still held are released and :class:`~multiverse.core._interrupt.RunInterrupted`
is raised. On a second signal (``KeyboardInterrupt``) the claims are released
at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from multiverse.core import STAGE_OF_RECORD, interrupt
from multiverse.engine._backend import ELSEWHERE, Backend, StageRun
from multiverse.engine._backend_dask import Dask
from multiverse.engine._backend_processes import Processes
from multiverse.engine._backend_threads import LocalThreads
from multiverse.errors import InputError
from multiverse.model import ModelClient
from multiverse.store import Held, Store

__all__ = ["BACKENDS", "ELSEWHERE", "Executor", "backend_class"]

#: the names ``run(..., backend=...)`` takes, and the class each stands for
BACKENDS: dict[str, type[LocalThreads] | type[Processes] | type[Dask]] = {
    "local": LocalThreads, "processes": Processes, "dask": Dask,
}


def backend_class(name: Any, *, client: ModelClient | None, budget: float | None,
                  rate_limits: Any) -> type[LocalThreads] | type[Processes] | type[Dask]:
    """The backend class ``name`` stands for, once the run's options are known to work with it."""
    chosen = BACKENDS.get(name) if isinstance(name, str) else None
    if chosen is None:
        raise InputError(f"backend: expected local, processes or dask, got {name!r}", param="backend")
    chosen.refuse(client=client, budget=budget, rate_limits=rate_limits)
    return chosen


class Executor:
    """Runs one stage's units on ``backend`` and counts how each ended.

    ``computed`` and ``failures`` (per stage: unit key -> reason) are what the
    run's tables and manifest report; a unit another run stored is neither.
    ``grace``: seconds the units in flight get to be stored after a stop.
    """

    def __init__(self, store: Store, backend: Backend, *, progress: bool | None, grace: float | None = None):
        self.store, self.backend, self.progress = store, backend, progress
        self.grace = interrupt.GRACE if grace is None else grace
        self.failures: dict[str, dict[str, str]] = defaultdict(dict)
        self.computed: dict[str, set[str]] = defaultdict(set)
        self._held = Held(store)  # the claims this run holds, released together on a stop

    def run(self, stage: str, units: list[Any], upstream: Callable[[Any], Any] = lambda unit: None) -> None:
        if not units:
            return
        interrupt.check()
        from multiverse.core import Progress

        bar = Progress(len(units), STAGE_OF_RECORD[stage], enabled=self.progress)
        results = self.backend.outcomes(StageRun(stage, units, upstream, self.store, self._held, self.grace))
        try:
            for key, failure in results:
                if failure is None:
                    self.computed[stage].add(key)
                elif failure is not ELSEWHERE:
                    self.failures[stage][key] = failure
                bar.update(1)
        finally:
            results.close()
            self.backend.end_stage()
            self.release_all()
            bar.close()

    def flow(self, stages: dict[str, tuple[int, Callable[[Any], Any]]], first: list[tuple[str, Any]],
             follow: Callable[[list[tuple[str, Any, str | None]]], list[tuple[str, Any]]]) -> None:
        """A run's stages as one flow on a backend that ``flows`` (:mod:`multiverse.engine._flow`).

        ``stages``: per stage, the units it may run (its progress bar's total) and their upstream;
        ``first``: (stage, unit) that can start now; ``follow``: the units made ready by those that
        ended, (stage, unit, failure) each. Counted as :meth:`run` counts a stage's units."""
        interrupt.check()
        from multiverse.core import Progress

        runs = {name: StageRun(name, [], upstream, self.store, self._held, self.grace) for name, (_, upstream) in stages.items()}
        bars = {name: Progress(total, STAGE_OF_RECORD[name], enabled=self.progress)
                for name, (total, _) in stages.items() if total}

        def ready(ended: list[tuple[StageRun, Any, str | None]]) -> list[tuple[StageRun, Any]]:
            return [(runs[name], unit) for name, unit in follow([(stage.stage, unit, failure) for stage, unit, failure in ended])]

        results = self.backend.flow([(runs[name], unit) for name, unit in first], ready)  # type: ignore[attr-defined]
        try:
            for stage, unit, failure in results:
                if failure is None:
                    self.computed[stage.stage].add(unit.key)
                elif failure is not ELSEWHERE:
                    self.failures[stage.stage][unit.key] = failure
                bars[stage.stage].update(1)
        finally:
            results.close()
            self.backend.end_stage()
            self.release_all()
            for bar in bars.values():
                bar.close()

    def release_all(self) -> None:
        """Release every claim this run still holds (on the way out of an interrupted stage)."""
        self._held.release_all()
