"""Computing one work unit's record: a drafted case, a rolled-out transcript or a judgment.

Each record carries its provenance (``multiverse.store._provenance``). Transport
failures are not records: :func:`attempt` turns a failed call into a failure
reason, which the run counts and records in its tables, and the unit is
computed again by a later run. A Dask worker runs them a block at a time
(``multiverse.engine._backend_dask``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from multiverse.core import OK
from multiverse.errors import BudgetExceeded, ModelError
from multiverse.model import ModelClient
from multiverse.store import CaseRecord, JudgmentRecord, TranscriptRecord, Turn, call_of, provenance
from multiverse.work import CaseUnit, JudgeCall, TranscriptUnit

#: a computed record of any stage
Record = CaseRecord | TranscriptRecord | JudgmentRecord

__all__ = ["attempt", "compute"]


def compute(stage: str, unit: Any, upstream: Any, client: ModelClient) -> Record:
    """One work unit's record. ``upstream`` is the case (rollout) or the turns (judge)."""
    if stage == "case":
        return _case(client, unit)
    if stage == "transcript":
        return _transcript(client, unit, upstream)
    return _judgment(client, unit, upstream)


def attempt(stage: str, unit: Any, upstream: Any, client: ModelClient,
            budget_hit: threading.Event) -> tuple[Record | None, str | None]:
    """(record, None) or (None, failure reason). Transport failures are reasons, never records."""
    if budget_hit.is_set():
        return None, "budget_exceeded: not started, the run's budget cap was reached"
    try:
        return compute(stage, unit, upstream, client), None
    except BudgetExceeded as exc:
        budget_hit.set()
        return None, f"budget_exceeded: {exc}"
    except ModelError as exc:
        from multiverse.core import short_reason

        return None, short_reason(f"{exc.reason}: {exc}", 500)


# One model client per worker process, size and store: its rate limits and budget are shared by the worker's units.
def _case(client: ModelClient, unit: CaseUnit) -> CaseRecord:
    from multiverse.stages import draft_case

    started = time.time()
    assert unit.generator is not None  # only generated cases are computed
    case, completion = draft_case(client, unit.spec, unit.generator, unit.cell, unit.index, seed=unit.seed)
    return {
        "status": OK,
        "case_id": unit.case_id,
        "cell": dict(unit.cell),
        "case": case,
        "provenance": provenance(unit.generator, started, [call_of(completion)]),
    }


def _transcript(client: ModelClient, unit: TranscriptUnit, case: dict[str, Any]) -> TranscriptRecord:
    from multiverse.stages import RolloutJob, run_rollout

    started = time.time()
    c = unit.configs
    job = RolloutJob(
        case=case, system=c["system"], system_prompt=c["system_prompt"], tools=c["tools"], setting=unit.setting,
        max_turns=unit.max_turns, user=c["user"], persona=c["persona"], instructions=c["instructions"],
        tool_simulator=c["tool_simulator"], tool_functions=c["tool_functions"], seed=unit.seed,
        user_template=c["user_template"], user_opening=c["user_opening"], tool_template=c["tool_template"],
        opening=(case.get("prompt") or "") if unit.opens_with_prompt else "",
    )
    record, calls = run_rollout(client, job)
    record["system"] = unit.system
    record["provenance"] = provenance(c["system"], started, calls)
    return record


def _judgment(client: ModelClient, unit: JudgeCall, upstream: list[Turn] | tuple[list[Turn], list[Turn]]) -> JudgmentRecord:
    """One judge call. ``upstream``: the transcript's turns, or for a pair (the system's turns, the reference's)."""
    from multiverse.stages import judge_transcript, score_transcript

    started = time.time()
    scale = unit.spec.judge.scale
    pair = isinstance(upstream, tuple)
    turns: list[Turn] = upstream[0] if isinstance(upstream, tuple) else upstream
    reference: list[Turn] | None = upstream[1] if isinstance(upstream, tuple) else None
    if scale.scored:
        record, call = score_transcript(client, unit.config, unit.spec.rubric.criteria, unit.evidence_standard, scale,
                                        turns, seed=unit.seed, reference=reference if pair else None,
                                        position=unit.position, system=unit.spec.judge.system_prompt,
                                        template=unit.spec.judge.template)
    else:
        record, call = judge_transcript(client, unit.config, unit.spec.rubric.criteria, unit.evidence_standard,
                                        turns, seed=unit.seed, system=unit.spec.judge.system_prompt,
                                        template=unit.spec.judge.template)
    record["sample"] = unit.sample
    record["provenance"] = provenance(unit.config, started, [call])
    return record
