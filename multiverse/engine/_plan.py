"""What ``plan`` answers, typed: per stage, the work units and their calls and cost, and the notes.

A :class:`Plan` is built here only (:func:`make_plan`), from the units listed
and the store read (``multiverse.engine._forecast``) or, for a grid past the
unit cap, from the units counted (``multiverse.engine._workcount``). The two
differ in what is known: a counted plan has no stored, failed, blocked or
to-compute counts (``None``), no reasons, and no wall time. :meth:`Plan.as_dict`
is the document ``plan --json`` prints; a plan also reads as that document
(``plan["stages"]["judge"]["calls"]``), as ``plan`` returned it before it was typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BatchPlan", "LaneTime", "Plan", "StagePlan", "WallTime", "make_plan"]

#: what every plan says about its call counts and costs
_ASSUMPTIONS = ("rollout calls assume every turn is used: early ends save calls, simulated-user retries and tool calls "
                "add some; costs use litellm's price list with rough token estimates, and are 0 for sim/ and local models")


@dataclass(frozen=True)
class StagePlan:
    """One stage's unique work units and their model calls: ``units = stored + failed + blocked + to_compute``.

    ``None`` where the store was not read (a counted plan). ``failures`` and
    ``blocked_by`` count the failed and blocked units by reason when it was.
    """

    units: int
    stored: int | None
    failed: int | None
    blocked: int | None
    to_compute: int | None
    calls: int
    calls_stored: int | None
    calls_to_make: int | None
    #: estimated USD of the calls to make (of every unit's calls when the store was not read)
    cost: float
    failures: Mapping[str, int] | None = None
    blocked_by: Mapping[str, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The stage's entry of the plan document, its keys in the order ``plan --json`` has always printed."""
        if self.stored is None:  # counted, the store not read
            return {"units": self.units, "stored": self.stored, "failed": self.failed, "blocked": self.blocked,
                    "to_compute": self.to_compute, "calls_stored": self.calls_stored,
                    "calls_to_make": self.calls_to_make, "calls": self.calls, "cost": self.cost}
        return {"units": self.units, "stored": self.stored, "failed": self.failed, "blocked": self.blocked,
                "failures": dict(self.failures or {}), "blocked_by": dict(self.blocked_by or {}), "to_compute": self.to_compute,
                "calls": self.calls, "calls_stored": self.calls_stored, "calls_to_make": self.calls_to_make,
                "cost": self.cost}


@dataclass(frozen=True)
class LaneTime:
    """How long one provider lane's calls take at least, and what sets it: ``rpm``, ``tpm`` or ``concurrency``."""

    seconds: float
    bound: str


@dataclass(frozen=True)
class WallTime:
    """How long the calls to make take at least, at ``jobs`` and ``seconds_per_call``, under the spec's rate limits."""

    seconds: float
    jobs: int
    seconds_per_call: float
    lanes: Mapping[str, LaneTime] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "jobs": self.jobs, "seconds_per_call": self.seconds_per_call,
                "lanes": {lane: {"seconds": t.seconds, "bound": t.bound} for lane, t in self.lanes.items()}}

    def note(self) -> str | None:
        """The plan's line on the wall time, or None when no call takes time (sim/ models only)."""
        if not self.lanes:
            return None
        lane, slowest = max(self.lanes.items(), key=lambda item: item[1].seconds)
        why = f"{lane}'s {slowest.bound}" if slowest.seconds >= self.seconds else f"the {self.jobs} jobs all providers share"
        return (f"wall time at least {_duration(self.seconds)}, set by {why}, at {self.seconds_per_call:g} s per call "
                "of a non-sim model and the spec's rate_limits")


@dataclass(frozen=True)
class BatchPlan:
    """The spec's batched roles: what their calls to make cost at batch prices, and how long the batches may take.

    ``prices``: per batched model, where its price is from (litellm's ``batch price``, or ``half the direct
    price`` where litellm lists none). ``waves``: batches one after the other at most (a multi-turn rollout
    waits a wave per turn); ``turnaround_seconds``: that many provider windows.
    """

    roles: tuple[str, ...]
    window: str
    waves: int
    turnaround_seconds: float
    cost: float
    direct_cost: float
    prices: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"roles": list(self.roles), "window": self.window, "waves": self.waves,
                "turnaround_seconds": self.turnaround_seconds, "cost": self.cost, "direct_cost": self.direct_cost,
                "prices": dict(self.prices)}

    def note(self) -> str:
        priced = "; ".join(f"{model}: {source}" for model, source in self.prices.items()) or "no priced model"
        return (f"batch ({', '.join(self.roles)}): their calls to make cost ~${self.cost:.4f} through the provider's "
                f"batch API instead of ~${self.direct_cost:.4f} sent directly ({priced}); turnaround up to "
                f"{self.waves} x {self.window} = {_duration(self.turnaround_seconds)}, the provider's window per wave "
                "(a batched multi-turn rollout waits one wave a turn)")


@dataclass(frozen=True, eq=False)
class Plan:
    """``plan``'s answer: the spec's universes, the stage each axis touches, each stage's work and the notes.

    ``wall`` is None for a grid counted, not listed: only the listed units are
    timed. :meth:`as_dict` is the document ``plan --json`` prints.
    """

    spec: str
    universes: tuple[str, ...]
    axis_stages: Mapping[str, str]
    #: draft, rollout, judge and score, in that order
    stages: Mapping[str, StagePlan]
    #: calls a run of each universe on its own would make, sharing nothing
    naive_calls: int
    wall: WallTime | None
    notes: tuple[str, ...]
    #: the store read, and which branch of the rule chose it ("... (beside the spec)"); None: not read
    store: str | None = None
    #: the batched roles' price and turnaround; None when the spec batches nothing
    batch: BatchPlan | None = None

    def as_dict(self) -> dict[str, Any]:
        """The document ``plan --json`` prints; ``wall`` only when the units were listed."""
        document: dict[str, Any] = {"spec": self.spec, "universes": list(self.universes),
                                    "axis_stages": dict(self.axis_stages),
                                    "stages": {name: s.as_dict() for name, s in self.stages.items()},
                                    "naive_calls": self.naive_calls, "store": self.store}
        if self.wall is not None:
            document["wall"] = self.wall.as_dict()
        if self.batch is not None:
            document["batch"] = self.batch.as_dict()
        document["notes"] = list(self.notes)
        return document


def make_plan(spec: str, universes: list[str], axis_stages: Mapping[str, str], stages: Mapping[str, StagePlan], *,
              naive_calls: int, wall: WallTime | None = None, counted: str | None = None,
              store: str | None = None, batch: BatchPlan | None = None) -> Plan:
    """The one way a :class:`Plan` is made, with the notes every plan gives.

    ``counted``: the note of a grid counted, not listed, which comes first.
    """
    calls = sum(s.calls for s in stages.values())
    notes = [f"running each universe on its own would take about {naive_calls} model calls; sharing needs {calls}",
             _ASSUMPTIONS]
    if counted is not None:
        notes.insert(0, counted)
    wall_note = wall.note() if wall is not None else None
    if wall_note is not None:
        notes.append(wall_note)
    if batch is not None:
        notes.append(batch.note())
    return Plan(spec=spec, universes=tuple(universes), axis_stages=dict(axis_stages), stages=dict(stages),
                naive_calls=naive_calls, wall=wall, notes=tuple(notes), store=store, batch=batch)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
