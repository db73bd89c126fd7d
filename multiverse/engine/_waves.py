"""Batch waves: a stage's requests of the spec's batched roles sent through the provider's batch API first.

Before a stage's units run, :meth:`Waves.before` works each unit out with a
client that answers what the store holds and, for a request of a batched role
(``batch.roles``) that it lacks, notes the request and stops that unit there
(:class:`_Deferring`). The noted requests go out together as batches
(``multiverse.model.BatchSender``), whose answers land in the store under the
keys direct calls use; then the units are worked out again, and so on until
no unit asks a batched role anything the store lacks. The stage then runs as
always and finds every answer stored: nothing is paid twice, and a unit's
record is the one a direct run makes.

One pass is one **wave**. A judge, a case draft or a single-turn rollout needs
one; a multi-turn rollout whose system or simulated user is batched needs one
per turn (each turn reads the answer before it): every conversation of the
stage advances one turn per wave. Requests of roles not batched are sent
directly during the passes, through the run's request cache, as the stage
would send them.

A request a batch did not answer (an error line, an expired or failed batch, an
answer that does not parse) is not noted again: the stage sends it directly
and it is counted in ``report.failed``. A batch the provider can no longer be
asked about stops the run with one line, its requests neither kept nor paid
again: the next run polls it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from multiverse.core import STAGE_OF_RECORD, ModelConfig, Progress, is_simulated
from multiverse.engine._compute import compute
from multiverse.errors import InputError, ModelError, SpecError
from multiverse.model import STAGE, BatchCall, BatchReport, BatchSender, LiteLLMClient, RequestCache, request_key
from multiverse.spec import Spec, batch_problem
from multiverse.store import Store

__all__ = ["Waves"]


class _Deferred(Exception):
    """A unit asked a batched role for a request the store lacks: it waits for the wave's batch."""


class _Deferring:
    """The client of one unit in a collecting pass (see module doc)."""

    def __init__(self, waves: Waves, batched: list[ModelConfig], pending: dict[str, BatchCall], lock: threading.Lock):
        self.waves, self.batched, self.pending, self.lock = waves, batched, pending, lock

    def complete(self, config: ModelConfig, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        key = request_key(config, messages, **kwargs)
        if (not is_simulated(config.model) and any(config == b for b in self.batched)
                and key not in self.waves.direct and not self.waves.store.has(STAGE, key)):
            with self.lock:
                self.pending.setdefault(key, BatchCall(key, config, list(messages), dict(kwargs)))
            raise _Deferred(key)
        completion = self.waves.collector.complete(config, messages, **kwargs)
        if completion.attempts:  # sent and paid for now: the unit that reads it when the stage runs counts it
            self.waves.paid({key: completion})
        return completion


class Waves:
    """The batch waves of one run (see module doc); ``report`` adds up every wave's batches."""

    def __init__(self, spec: Spec, client: Any, store: Store, *, jobs: int, progress: bool | None = False):
        self.spec, self.client, self.store, self.jobs, self.progress = spec, client, store, jobs, progress
        self.roles = frozenset(spec.batch.roles)
        self.report = BatchReport()
        self.waves = 0
        #: request keys a batch did not answer: sent directly from now on
        self.direct: set[str] = set()
        self._sender: BatchSender | None = None
        # The passes' own request cache: what they are served from the store is not counted as the stage's,
        # and what they pay for is handed to the run's cache (``paid``), whose units count it.
        inner = client.client if isinstance(client, RequestCache) else client
        self.collector = RequestCache(inner, store) if isinstance(client, RequestCache) else client

    def check(self, work: Any) -> None:
        """An axis may have given a batched role a model with no batch API: refused in one line before any call."""
        units = [("case", u) for u in work.cases.values() if u.given is None]
        units += [("transcript", u) for u in work.transcripts.values()] + [("judgment", u) for u in work.judge_calls.values()]
        for stage, unit in units:
            for config in self._batched(stage, unit):
                problem = batch_problem(config.model)
                if problem is not None:
                    raise SpecError(self.spec.path or "<spec>", "batch.roles", f"a universe's {problem}")

    def before(self, stage: str, units: list[Any], upstream: Callable[[Any], Any]) -> None:
        """Send the batched roles' requests of ``units`` in waves until the store holds every one."""
        batched = [(unit, configs) for unit in units if (configs := self._batched(stage, unit))]
        if not batched:
            return
        while True:
            pending = self._collect(stage, batched, upstream)
            if not pending:
                return
            self.waves += 1
            # A batch may take the provider's whole window: the wait is announced, and its end.
            bar = Progress(len(pending), f"batch {STAGE_OF_RECORD[stage]} wave {self.waves}", unit="request",
                           enabled=self.progress)
            try:
                report = self._sender_for().send(pending)
            except ModelError as exc:  # not submitted: the stage sends them directly, and says why if that fails too
                report = BatchReport(failed=dict.fromkeys(pending, str(exc)))
            except BaseException:
                bar.close()
                raise
            bar.update(report.answered)  # the ones the batches answered; the rest go directly
            bar.close()
            self.report.add(report)
            self.direct.update(report.failed)
            self.paid(report.paid)
            if report.unsettled:
                reason = next(iter(report.unsettled.values()))
                raise ModelError(f"{len(report.unsettled)} batched requests: {reason}; rerun to poll the batch again "
                                 "(its requests are not sent again)", reason="batch_in_flight")

    def paid(self, completions: Mapping[str, Any]) -> None:
        """Answers paid for outside the stage: the stage's units count their calls and cost, in the run's manifest."""
        if isinstance(self.client, RequestCache):
            self.client.prepaid(completions)

    def _batched(self, stage: str, unit: Any) -> list[ModelConfig]:
        roles = self.roles
        if stage == "case":
            configs = [unit.generator] if "generator" in roles else []
        elif stage == "transcript":
            configs = [unit.configs[name] for role, name in (("systems", "system"), ("user", "user"),
                                                            ("tool_simulator", "tool_simulator")) if role in roles]
        else:
            configs = [unit.config] if "judge" in roles else []
        return [c for c in configs if c is not None and not is_simulated(c.model)]

    def _sender_for(self) -> BatchSender:
        if self._sender is None:
            llm = self.client
            while not isinstance(llm, LiteLLMClient) and getattr(llm, "client", None) is not None:
                llm = llm.client  # the request cache, the breaker: the litellm client is underneath
            if not isinstance(llm, LiteLLMClient):
                raise InputError("client: batch.roles needs the run's LiteLLMClient (or none, for the default); "
                                 f"got {type(llm).__name__}", param="client")
            self._sender = BatchSender(llm, self.store, window=self.spec.batch.window, poll=self.spec.batch.poll)
        return self._sender

    def _collect(self, stage: str, batched: list[Any], upstream: Callable[[Any], Any]) -> Mapping[str, BatchCall]:
        """One pass over the units: the batched requests they need that the store lacks."""
        pending: dict[str, BatchCall] = {}
        lock = threading.Lock()

        def one(item: tuple[Any, list[ModelConfig]]) -> None:
            unit, configs = item
            try:
                compute(stage, unit, upstream(unit), _Deferring(self, configs, pending, lock))
            except (_Deferred, ModelError):
                pass  # waiting for a batch; a direct call's failure is the stage's to record when it runs the unit

        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            list(pool.map(one, batched))
        return pending
