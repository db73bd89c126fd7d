"""Judge stage: one judge sample labels one transcript against the rubric.

The judge sees the transcript, the rubric and the evidence-standard text of
the chosen level, never the design cell the case was written for. For each
criterion it says whether it applies and, if so, whether the transcript
complies, with a rationale quoting it.

An answer that cannot be parsed (after the client's one repair request), leaves
out a criterion, or labels an applicable criterion without a verdict, is
recorded as ``judge_failed``: it is never turned into a label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from multiverse.core import ModelConfig
from multiverse.model import ModelClient
from multiverse.store import Call, CriterionLabel, JudgmentRecord, call_of
from multiverse.work import judge_messages, judgment_schema, render_transcript

from ..errors import ModelError
from ..spec import Criterion

__all__ = ["UNPARSEABLE_REQUESTS", "judge_transcript", "validate_judgment"]

#: The requests behind an answer that stayed unparseable, when the client does not say
#: (``ModelError.requests``): the answer and the one repair request (``multiverse.model._llm``).
UNPARSEABLE_REQUESTS = 2


def validate_judgment(answer: Any, criteria: Sequence[Criterion]) -> tuple[list[CriterionLabel] | None, str]:
    """Check a parsed judge answer covers every criterion with consistent labels.

    Returns ``(rows, "")`` or ``(None, reason)``.
    """
    listed = answer.get("criteria") if isinstance(answer, dict) else None
    by_id: dict[str, dict] = {}
    if isinstance(listed, dict):  # the schema's form: {criterion id: labels}
        by_id = {str(k): v for k, v in listed.items() if isinstance(v, dict)}
    elif isinstance(listed, list):  # a model that answered with a list of {id, ...} anyway
        for entry in listed:
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                by_id.setdefault(entry["id"], entry)
    else:
        return None, "no criteria in the answer"
    rows: list[CriterionLabel] = []
    for c in criteria:
        entry = by_id.get(c.id)
        if entry is None:
            return None, f"criterion {c.id} missing from the answer"
        applicable = entry.get("applicable")
        compliant = entry.get("compliant")
        if not isinstance(applicable, bool):
            return None, f"criterion {c.id}: applicable is not true/false"
        if applicable and not isinstance(compliant, bool):
            return None, f"criterion {c.id}: applicable but no compliant verdict"
        rows.append(
            {
                "criterion": c.id,
                "permissible": c.permissible,
                "applicable": applicable,
                "compliant": compliant if applicable else None,
                "rationale": str(entry.get("rationale", ""))[:2000],
            }
        )
    return rows, ""


def judge_transcript(
    client: ModelClient, config: ModelConfig, criteria: Sequence[Criterion], evidence_standard: str,
    turns: Sequence[Mapping[str, Any]], *, seed: int,
) -> tuple[JudgmentRecord, Call]:
    """Judge one transcript once. Returns the judgment (status ok or judge_failed) and the call that answered.

    Transport failures raise ``ModelError`` (recorded by the caller, not stored).
    An answer that stayed unparseable after its repair is a judge_failed record
    whose call reports no answer, only the requests it took.
    """
    messages = judge_messages(criteria, evidence_standard, render_transcript(turns))
    schema = judgment_schema([c.id for c in criteria])
    try:
        completion = client.complete(config, messages, seed=seed, schema=schema, schema_name="judgment")
    except ModelError as exc:
        if exc.reason == "unparseable":
            from multiverse.core import short_reason

            # Paid requests that returned nothing usable (usage unknown): still counted.
            sent = UNPARSEABLE_REQUESTS if exc.requests is None else exc.requests
            failed: Call = {"model_reported": None, "usage": {}, "cost": 0.0, "requests": sent}
            return {"status": "judge_failed", "reason": short_reason(f"unparseable: {exc}", 300), "criteria": []}, failed
        raise
    rows, problem = validate_judgment(completion.parsed, criteria)
    call = call_of(completion)
    if rows is None:
        return {"status": "judge_failed", "reason": problem, "criteria": []}, call
    return {"status": "ok", "reason": "", "criteria": rows}, call
