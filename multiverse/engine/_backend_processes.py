"""The processes backend: a stage's units handed to worker processes on this machine.

The run's own process keeps the bookkeeping: it claims each unit in the store
before handing it to the :class:`~multiverse.engine._processes.WorkerPool`
and releases the claim when the worker reports back; the workers compute and
store. A worker that dies stops the run (``WorkerLost``); after a stop no
worker starts a unit, and the ones in flight get the stage's grace.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator, Mapping
from typing import Any

from multiverse.core import STAGE_OF_RECORD, RunInterrupted, interrupt
from multiverse.engine._backend import CLAIMED, ELSEWHERE, NOT_STARTED, POLL, Outcome, StageRun, wait_for_claimed
from multiverse.engine._processes import WorkerPool
from multiverse.errors import InputError
from multiverse.model import ModelClient
from multiverse.store import Store

__all__ = ["Processes"]


class Processes:
    """Hands each unit, claimed here, to ``pool``, whose processes compute and store it.

    Entering the backend starts the pool's workers and leaving ends them; a
    pool the caller started already may be used without entering.
    """

    def __init__(self, pool: WorkerPool):
        self.pool = pool

    @classmethod
    def refuse(cls, *, client: ModelClient | None, budget: float | None, rate_limits: Any) -> None:
        if client is not None:
            raise InputError("client: a client of your own works only with backend='local' (each worker process "
                             "makes its own LiteLLMClient)", param="client")

    @classmethod
    def for_run(cls, *, store: Store, client: ModelClient, jobs: int, budget: float | None,
                rate_limits: Mapping[str, Any] | None, scheduler: Any) -> Processes:
        """One worker per core, each pacing its calls by its share of the ``rate_limits``
        and stopping at its share of the ``budget`` (``multiverse.engine._processes``)."""
        return cls(WorkerPool(store.location, jobs, budget=budget, rate_limits=rate_limits))

    def __enter__(self) -> Processes:
        self.pool.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.pool.__exit__(*exc)

    def outcomes(self, stage: StageRun) -> Generator[Outcome, None, None]:
        return wait_for_claimed(stage, lambda units: self._handed_out(stage, units))

    def end_stage(self) -> None:
        """Nothing runs in this process between stages."""

    def _handed_out(self, stage: StageRun, units: list[Any]) -> Iterator[tuple[Any, str | None]]:
        """(unit, failure) per unit as each finishes in the worker pool; each unit is
        claimed here before it is handed out and released when it is reported."""
        try:
            yield from self._hand_out(stage, units)
        except BaseException:  # a bug, a lost worker, or the run's consumer stopped: start nothing more
            self.pool.stop()
            raise

    def _hand_out(self, stage: StageRun, units: list[Any]) -> Iterator[tuple[Any, str | None]]:
        pool, name = self.pool, stage.stage
        todo = list(reversed(units))
        sent: dict[int, Any] = {}
        while (todo or sent) and not interrupt.requested():
            while todo and len(sent) < pool.window:
                unit = todo.pop()
                taken = stage.claims.take(name, unit.key)
                stopping, claimed = taken is None, bool(taken)
                if stopping:
                    todo.append(unit)
                    break
                if not claimed:
                    yield unit, CLAIMED
                    continue
                if stage.store.has(name, unit.key):  # stored between our look-up and our claim
                    stage.claims.release(name, unit.key)
                    yield unit, ELSEWHERE
                    continue
                sent[pool.submit(name, unit, stage.upstream(unit))] = unit
            yield from self._reported(stage, sent)
        if not interrupt.requested():
            return
        # Stopped: no worker starts a unit any more; give the ones in flight a grace to be stored.
        pool.stop()
        deadline = time.monotonic() + stage.grace
        while sent and time.monotonic() < deadline:
            yield from self._reported(stage, sent)
        stage.claims.release_all()
        raise RunInterrupted(f"{STAGE_OF_RECORD[name]} stopped, {len(sent)} unit(s) still in flight abandoned")

    def _reported(self, stage: StageRun, sent: dict[Any, Any]) -> Iterator[tuple[Any, str | None]]:
        for ticket, failure in self.pool.finished(timeout=POLL):
            unit = sent.pop(ticket)
            stage.claims.release(stage.stage, unit.key)
            if failure != NOT_STARTED:
                yield unit, failure
