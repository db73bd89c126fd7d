"""The forecast ``plan`` gives before anything runs: per stage, units and calls to make, and what they may cost.

Units are counted by the one definition of outcomes (``multiverse.outcomes``):
``units = stored + failed + blocked + to_compute``. Rollout calls assume every
turn is used (early ends save calls, simulated-user retries and tool calls
add some); costs use litellm's price list with rough token estimates per
call, and are 0 for sim/ and local models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .grid import Universe, axis_stages
from .outcomes import row_outcomes, tally, unit_outcomes
from .pricing import estimate_cost
from .spec import Spec
from .store import Store
from .work import TranscriptUnit, Work

__all__ = ["forecast"]

#: rough (prompt, completion) tokens per call of each stage, for the cost estimate
TOKENS = {"draft": (700, 500), "rollout": (900, 250), "judge": (2500, 600)}


def _calls_per_transcript(unit: TranscriptUnit) -> int:
    # A user and a system call per turn, before retries, tool calls and early ends.
    return 1 if unit.setting == "single_turn" else 2 * unit.max_turns


def forecast(spec: Spec, universes: list[Universe], work: Work, st: Store) -> dict[str, Any]:
    """Per stage: unique work units (stored, failed, blocked, to compute), their model calls, and estimated cost.

    ``calls`` counts every unit's calls, ``calls_to_make`` those of the units to compute.
    """
    # Stored records are read for their status: a stored failure is not work
    # to do, and the judge calls of a failed transcript are blocked, not pending.
    stored_cases = [k for k, c in work.cases.items() if c.given is None and st.has("case", k)]
    records = {
        "case": {k: {"status": "ok"} for k in stored_cases},
        "transcript": st.get_many("transcript", [k for k in work.transcripts if st.has("transcript", k)]),
        "judgment": st.get_many("judgment", [k for k in work.judge_calls if st.has("judgment", k)]),
    }
    outcomes = unit_outcomes(work, records)
    stages: dict[str, dict] = {}

    def stage(name: str, store_stage: str, units: dict, calls_of: Callable, model_of: Callable, tokens: tuple[int, int]):
        settled = outcomes[store_stage]
        todo = [u for k, u in units.items() if settled[k][0] == "pending"]
        counts = tally((("computed", "") if o == "pending" else (o, r)) for o, r in settled.values())
        counts["to_compute"] = counts.pop("computed")
        stages[name] = {
            **counts,
            "calls": sum(calls_of(u) for u in units.values()),
            "calls_stored": sum(calls_of(u) for k, u in units.items() if settled[k][0] == "stored"),
            "calls_to_make": sum(calls_of(u) for u in todo),
            "cost": sum(estimate_cost(m, calls_of(u), *tokens) for u in todo for m in model_of(u)),
        }

    generated = {k: c for k, c in work.cases.items() if c.given is None}
    stage("draft", "case", generated, lambda u: 1, lambda u: [u.generator.model], TOKENS["draft"])
    stage(
        "rollout",
        "transcript",
        work.transcripts,
        _calls_per_transcript,
        lambda u: [u.configs["system"].model] + ([u.configs["user"].model] if u.configs["user"] else []),
        TOKENS["rollout"],
    )
    stage("judge", "judgment", work.judge_calls, lambda u: 1, lambda u: [u.config.model], TOKENS["judge"])
    # Scoring makes no call: a verdict row is to compute while any judgment it reads is.
    scored = tally((("computed", "") if o == "pending" else (o, r)) for o, r in row_outcomes(work, outcomes))
    scored["to_compute"] = scored.pop("computed")
    stages["score"] = {**scored, "calls": 0, "calls_stored": 0, "calls_to_make": 0, "cost": 0.0}
    naive = sum(
        (work.cases[r.case_key].given is None) + _calls_per_transcript(work.transcripts[r.transcript_key]) + len(r.judge_calls)
        for r in work.rows
    )
    notes = [
        f"running each universe on its own would take about {naive} model calls; sharing needs "
        f"{sum(s['calls'] for s in stages.values())}",
        "rollout calls assume every turn is used: early ends save calls, simulated-user retries and tool calls add some; "
        "costs use litellm's price list with rough token estimates, and are 0 for sim/ and local models",
    ]
    return {
        "spec": spec.name,
        "universes": [u.id for u in universes],
        "axis_stages": axis_stages(spec),
        "stages": stages,
        "naive_calls": naive,
        "notes": notes,
    }


