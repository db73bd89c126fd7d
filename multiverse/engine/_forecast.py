"""The forecast ``plan`` gives before anything runs: per stage, units and calls to make, and what they may cost.

Units are counted by the one definition of outcomes (``multiverse.core._outcomes``):
``units = stored + failed + blocked + to_compute``. Rollout calls assume every
turn is used (early ends save calls, simulated-user retries and tool calls
add some); costs use litellm's price list with rough token estimates per
call, and are 0 for sim/ and local models. The wall time is a lower bound
from the spec's ``rate_limits`` and ``jobs`` (:func:`multiverse.model._pacing.estimate_wall_seconds`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from multiverse.core import OK, is_simulated, row_outcomes, tally, unit_outcomes
from multiverse.engine._plan import BatchPlan, LaneTime, Plan, StagePlan, WallTime, make_plan
from multiverse.engine._workcount import calls_per_transcript
from multiverse.model import BATCH_TURNAROUND, TOKENS, batch_price_per_token, estimate_cost, estimate_wall_seconds
from multiverse.spec import Spec, Universe, axis_stages
from multiverse.store import Store
from multiverse.work import TranscriptUnit, Work

__all__ = ["forecast"]

#: seconds a hosted model takes to answer, for the wall-time estimate
SECONDS_PER_CALL = 5.0


def _calls_per_transcript(unit: TranscriptUnit) -> int:
    return calls_per_transcript(unit.setting, unit.max_turns)


def _endpoint(config: Any) -> tuple[str, str | None]:
    return config.model, config.api_base


def _calls_by_endpoint(unit: TranscriptUnit) -> dict[tuple[str, str | None], int]:
    system = _endpoint(unit.configs["system"])
    if unit.setting == "single_turn":
        return {system: 1}
    calls = {system: unit.max_turns}
    if unit.configs["user"] is not None:
        user = _endpoint(unit.configs["user"])
        calls[user] = calls.get(user, 0) + unit.max_turns
    return calls


def forecast(spec: Spec, universes: list[Universe], work: Work, st: Store, *, jobs: int = 8,
             store_named: str | None = None) -> Plan:
    """Per stage: unique work units (stored, failed, blocked, to compute), their model calls, and estimated cost;
    and ``wall``: at least how long the calls to make take at ``jobs`` under the spec's ``rate_limits``.

    ``calls`` counts every unit's calls, ``calls_to_make`` those of the units to compute.
    """
    # Stored records are read for their status: a stored failure is not work
    # to do, and the judge calls of a failed transcript are blocked, not pending.
    stored_cases = [k for k, c in work.cases.items() if c.given is None and st.has("case", k)]
    records = {
        "case": {k: {"status": OK} for k in stored_cases},
        "transcript": st.get_many("transcript", [k for k in work.transcripts if st.has("transcript", k)]),
        "judgment": st.get_many("judgment", [k for k in work.judge_calls if st.has("judgment", k)]),
    }
    outcomes = unit_outcomes(work, records)
    stages: dict[str, StagePlan] = {}
    # per (model, api_base): the lanes a run paces
    calls_by_model: dict[tuple[str, str | None], int] = {}
    tokens_by_model: dict[tuple[str, str | None], int] = {}
    batched = set(spec.batch.roles)
    # what the batched calls to make cost at batch prices, what they would cost sent directly, where each price is from
    batch_costs = {"batch": 0.0, "direct": 0.0}
    sources: dict[str, str] = {}

    def priced(role: str, model: str, calls: int, tokens: tuple[int, int]) -> float:
        direct = estimate_cost(model, calls, *tokens)
        if role not in batched or is_simulated(model):
            return direct
        inp, out, source = batch_price_per_token(model)
        sources[model] = source
        batch_costs["direct"] += direct
        batch_costs["batch"] += calls * (inp * tokens[0] + out * tokens[1])
        return calls * (inp * tokens[0] + out * tokens[1])

    def stage(name: str, store_stage: str, units: dict[str, Any], calls_of: Callable[..., Any], model_of: Callable[..., Any], tokens: tuple[int, int],
              split: Callable[..., Any]) -> None:
        settled = outcomes[store_stage]
        todo = [u for k, u in units.items() if settled[k][0] == "pending"]
        for unit in todo:
            for endpoint, n in split(unit).items():
                if not is_simulated(endpoint[0]):  # simulated models answer in-process, in no time worth counting
                    calls_by_model[endpoint] = calls_by_model.get(endpoint, 0) + n
                    tokens_by_model[endpoint] = tokens_by_model.get(endpoint, 0) + n * sum(tokens)
        stages[name] = _stage_plan(
            settled.values(),
            calls=sum(calls_of(u) for u in units.values()),
            calls_stored=sum(calls_of(u) for k, u in units.items() if settled[k][0] == "stored"),
            calls_to_make=sum(calls_of(u) for u in todo),
            cost=sum(priced(role, m, calls_of(u), tokens) for u in todo for role, m in model_of(u)),
        )

    generated = {k: c for k, c in work.cases.items() if c.given is None}
    stage("draft", "case", generated, lambda u: 1, lambda u: [("generator", u.generator.model)], TOKENS["draft"],
          lambda u: {_endpoint(u.generator): 1})
    stage(
        "rollout",
        "transcript",
        work.transcripts,
        _calls_per_transcript,
        lambda u: [("systems", u.configs["system"].model)] + ([("user", u.configs["user"].model)] if u.configs["user"] else []),
        TOKENS["rollout"],
        _calls_by_endpoint,
    )
    stage("judge", "judgment", work.judge_calls, lambda u: 1, lambda u: [("judge", u.config.model)], TOKENS["judge"],
          lambda u: {_endpoint(u.config): 1})
    # Scoring makes no call: a verdict row is to compute while any judgment it reads is.
    stages["score"] = _stage_plan(row_outcomes(work, outcomes), calls=0, calls_stored=0, calls_to_make=0, cost=0.0)
    naive = sum(
        (work.cases[r.case_key].given is None) + _calls_per_transcript(work.transcripts[r.transcript_key]) + len(r.judge_calls)
        for r in work.rows
    )
    wall = estimate_wall_seconds(calls_by_model, tokens_by_model, spec.rate_limits, jobs,
                                 seconds_per_call=SECONDS_PER_CALL)
    # per provider lane: its seconds and what sets them (rpm, tpm or concurrency)
    lanes = {lane: LaneTime(seconds, bound) for lane, (seconds, bound) in wall.lanes.items()}
    batch = None
    if batched:
        waves = _waves(spec, work)
        batch = BatchPlan(roles=tuple(spec.batch.roles), window=spec.batch.window, waves=waves,
                          turnaround_seconds=waves * BATCH_TURNAROUND[spec.batch.window], cost=batch_costs["batch"],
                          direct_cost=batch_costs["direct"], prices=dict(sorted(sources.items())))
    return make_plan(spec.name, [u.id for u in universes], axis_stages(spec), stages, naive_calls=naive,
                     wall=WallTime(wall.seconds, jobs, SECONDS_PER_CALL, lanes), store=store_named, batch=batch)


def _waves(spec: Spec, work: Work) -> int:
    """Batches one after the other, at most: one for the drafts, one per turn a batched rollout role takes, one for
    the judge (a turn waits for the one before it, so a batched multi-turn rollout is a wave a turn)."""
    roles = set(spec.batch.roles)
    waves = int("generator" in roles and any(c.given is None for c in work.cases.values()))
    turns = 0
    for unit in work.transcripts.values():
        per = calls_per_transcript(unit.setting, unit.max_turns) if unit.setting == "multi_turn" else 1
        system_turns = unit.max_turns if unit.setting == "multi_turn" else 1
        if roles & {"systems", "user", "tool_simulator"}:
            # both sides batched: every call is its own wave; one side: its turns are
            turns = max(turns, per if {"systems", "user"} <= roles else system_turns)
    return waves + turns + int("judge" in roles)


def _stage_plan(settled: Iterable[tuple[str, str]], *, calls: int, calls_stored: int, calls_to_make: int,
                cost: float) -> StagePlan:
    """A stage's plan from its units' outcomes (``pending`` is to compute) and calls."""
    counts = tally((("computed", "") if o == "pending" else (o, r)) for o, r in settled)
    return StagePlan(units=counts["units"], stored=counts["stored"], failed=counts["failed"], blocked=counts["blocked"],
                     to_compute=counts["computed"], calls=calls, calls_stored=calls_stored, calls_to_make=calls_to_make,
                     cost=cost, failures=counts["failures"], blocked_by=counts["blocked_by"])
