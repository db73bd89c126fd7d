"""The dask backend: a stage's units sent to a Dask cluster whose workers share the store.

Each worker runs ``remote`` for a unit (default
:func:`multiverse.engine._compute.dask_unit`) and stores what it computes
itself, so a worker that dies loses only its call in flight. Units go out in
a window, so a stop leaves little queued; the queued ones are cancelled.
dask.distributed is imported only when this backend is entered.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

from multiverse.core import STAGE_OF_RECORD, RunInterrupted
from multiverse.core import _interrupt as interrupt
from multiverse.engine._backend import POLL, Outcome, StageRun
from multiverse.engine._processes import usable_cores
from multiverse.errors import InputError
from multiverse.model import ModelClient
from multiverse.store import Store

__all__ = ["Dask"]


class Dask:
    """Units computed on the Dask cluster at ``scheduler``: an address, a ``distributed.Client``
    of the caller's (used, never closed), or None for a local cluster of one worker per core.

    ``remote(stage, unit, upstream, store_root, jobs) -> (key, failure)`` is what a
    worker runs for one unit. Entering connects (or starts the local cluster);
    leaving closes what was opened here.
    """

    def __init__(self, scheduler: Any = None, *, jobs: int, remote: Callable | None = None):
        from multiverse.engine import _compute as compute

        self.scheduler, self.jobs = scheduler, max(1, jobs)
        self.remote = compute.dask_unit if remote is None else remote
        given = scheduler is not None and not isinstance(scheduler, str)
        #: the client units are submitted to: the caller's, or the one opened on entering
        self.client: Any = scheduler if given else None
        self._opened: Any = None
        self._cluster: Any = None

    @classmethod
    def refuse(cls, *, client: ModelClient | None, budget: float | None, rate_limits: Any) -> None:
        if budget is not None:
            raise InputError("budget: not supported with backend='dask' (each worker has its own client); "
                             "run locally to cap spending", param="budget")
        if rate_limits:
            # Each worker paces only its own calls: together they would exceed the declared limits.
            raise InputError("backend: 'dask' does not keep the spec's rate_limits (each worker paces its own calls); "
                             "run locally, or remove rate_limits", param="backend")

    @classmethod
    def for_run(cls, *, store: Store, client: ModelClient, jobs: int, budget: float | None,
                rate_limits: Mapping[str, Any] | None, scheduler: Any) -> Dask:
        return cls(scheduler, jobs=jobs)

    def __enter__(self) -> Dask:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise InputError("backend='dask': dask.distributed is not installed; pip install 'multiverse[dask]'",
                             param="backend") from None
        if self.client is not None:
            return self  # the caller's own distributed.Client
        if self.scheduler is None:
            # One worker per core and the jobs split among them: `jobs` is the run's concurrent calls.
            workers = min(usable_cores(), self.jobs)
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=max(1, self.jobs // workers),
                                         processes=True, dashboard_address=None)
            self._opened = Client(self._cluster)
        else:
            try:
                self._opened = Client(self.scheduler, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise InputError(f"scheduler: cannot reach a Dask scheduler at {self.scheduler} ({exc})",
                                 param="scheduler") from None
        self.client = self._opened
        return self

    def __exit__(self, *exc: object) -> None:
        if self._opened is not None:
            self._opened.close()
            self.client = self._opened = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def outcomes(self, stage: StageRun) -> Generator[Outcome, None, None]:
        from distributed import wait

        root = stage.store.location
        todo = list(reversed(stage.units))
        window = max(64, 8 * self.jobs)
        futures: set = set()
        try:
            while todo or futures:
                while todo and len(futures) < window and not interrupt.requested():
                    unit = todo.pop()
                    futures.add(self.client.submit(self.remote, stage.stage, unit, stage.upstream(unit), root, self.jobs,
                                                   pure=False))
                if interrupt.requested():
                    raise RunInterrupted(f"{STAGE_OF_RECORD[stage.stage]} stopped, {len(futures)} unit(s) cancelled "
                                         "or abandoned")
                try:
                    finished = wait(futures, timeout=POLL * 5, return_when="FIRST_COMPLETED").done
                except TimeoutError:
                    continue
                futures -= finished
                for future in finished:
                    yield future.result()
        finally:
            if futures:
                # Units already running on a worker finish there and are stored by it.
                self.client.cancel(list(futures))

    def end_stage(self) -> None:
        """The cluster's workers store what they finish: nothing to stop here."""
