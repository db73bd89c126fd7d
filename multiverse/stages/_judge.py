"""Judge stage: one judge sample labels one transcript against the rubric.

The judge sees the transcript, the rubric and the evidence-standard text of
the chosen level, never the design cell the case was written for. For each
criterion it says whether it applies and, if so, whether the transcript
complies, with a rationale quoting it.

An answer that cannot be parsed (after the client's one repair request), leaves
out a criterion, or labels an applicable criterion without a verdict, is
recorded as ``judge_failed``: it is never turned into a label.

A scored judge (``judge.scale`` not binary, :func:`score_transcript`) answers
one score for the transcript, weighing the rubric's criteria, or for a
pairwise scale its preference for transcript A over transcript B. A score that
is not a number, off the scale, or not a whole number on an ordinal scale is a
``judge_failed`` record too, never a score. The record keeps the score as the
judge gave it and the position the system was shown in (``ab``: first);
scoring maps a ``ba`` preference back to the system's side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from multiverse.core import OK, ModelConfig
from multiverse.model import ModelClient
from multiverse.store import Call, CriterionLabel, JudgmentRecord, call_of
from multiverse.work import judge_messages, judgment_schema, render_transcript, score_messages, score_schema

from ..errors import ModelError
from ..spec import Criterion, Scale

__all__ = ["UNPARSEABLE_REQUESTS", "judge_transcript", "score_transcript", "validate_judgment", "validate_score"]

#: The requests behind an answer that stayed unparseable, when the client does not say
#: (``ModelError.requests``): the answer and the one repair request (``multiverse.model._llm``).
UNPARSEABLE_REQUESTS = 2


def validate_judgment(answer: Any, criteria: Sequence[Criterion]) -> tuple[list[CriterionLabel] | None, str]:
    """Check a parsed judge answer covers every criterion with consistent labels.

    Returns ``(rows, "")`` or ``(None, reason)``.
    """
    listed = answer.get("criteria") if isinstance(answer, dict) else None
    by_id: dict[str, dict[str, Any]] = {}
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


def validate_score(answer: Any, scale: Scale) -> tuple[float | None, str, str]:
    """Check a scored judge's parsed answer: a number on ``scale``. Returns ``(score, rationale, "")`` or ``(None, "", reason)``."""
    score = answer.get("score") if isinstance(answer, dict) else None
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return None, "", f"no score in the answer (expected a number from {scale.min:g} to {scale.max:g})"
    value = float(score)
    if not scale.min <= value <= scale.max:  # NaN fails this too
        return None, "", f"score {value:g} is off the scale (expected {scale.min:g} to {scale.max:g})"
    if scale.type == "ordinal" and not value.is_integer():
        return None, "", f"score {value:g} is not a whole number (an ordinal scale from {scale.min:g} to {scale.max:g})"
    rationale = answer.get("rationale", "")
    return value, (rationale if isinstance(rationale, str) else "")[:2000], ""


def _unparseable(exc: ModelError) -> tuple[JudgmentRecord, Call]:
    from multiverse.core import short_reason

    # Paid requests that returned nothing usable (usage unknown): still counted.
    sent = UNPARSEABLE_REQUESTS if exc.requests is None else exc.requests
    failed: Call = {"model_reported": None, "usage": {}, "cost": 0.0, "requests": sent}
    return {"status": "judge_failed", "reason": short_reason(f"unparseable: {exc}", 300), "criteria": []}, failed


def score_transcript(
    client: ModelClient, config: ModelConfig, criteria: Sequence[Criterion], evidence_standard: str, scale: Scale,
    turns: Sequence[Mapping[str, Any]], *, seed: int, reference: Sequence[Mapping[str, Any]] | None = None,
    position: str = "ab", system: str | None = None, template: str | None = None,
) -> tuple[JudgmentRecord, Call]:
    """Score one transcript once (with ``reference``: the pair, the system's transcript first for ``ab``).
    ``system`` and ``template``: the spec's ``judge.system_prompt`` and ``judge.template`` (None: built in).

    Returns the judgment (status ok with ``score``, ``rationale`` and ``position``, or
    judge_failed) and the call that answered; transport failures raise ``ModelError``.
    """
    mine = render_transcript(turns)
    if reference is None:
        messages = score_messages(criteria, evidence_standard, scale, mine, system=system, template=template)
    else:
        theirs = render_transcript(reference)
        first, second = (mine, theirs) if position == "ab" else (theirs, mine)
        messages = score_messages(criteria, evidence_standard, scale, first, second, system=system, template=template)
    try:
        completion = client.complete(config, messages, seed=seed, schema=score_schema(), schema_name="score",
                                     task=messages.task)
    except ModelError as exc:
        if exc.reason == "unparseable":
            return _unparseable(exc)
        raise
    score, rationale, problem = validate_score(completion.parsed, scale)
    call = call_of(completion)
    if score is None:
        return {"status": "judge_failed", "reason": problem, "criteria": []}, call
    record: JudgmentRecord = {"status": OK, "reason": "", "criteria": [], "score": score, "rationale": rationale}
    if reference is not None:
        record["position"] = position
    return record, call


def judge_transcript(
    client: ModelClient, config: ModelConfig, criteria: Sequence[Criterion], evidence_standard: str,
    turns: Sequence[Mapping[str, Any]], *, seed: int, system: str | None = None, template: str | None = None,
) -> tuple[JudgmentRecord, Call]:
    """Judge one transcript once. Returns the judgment (status ok or judge_failed) and the call that answered.
    ``system`` and ``template``: the spec's ``judge.system_prompt`` and ``judge.template`` (None: built in).

    Transport failures raise ``ModelError`` (recorded by the caller, not stored).
    An answer that stayed unparseable after its repair is a judge_failed record
    whose call reports no answer, only the requests it took.
    """
    messages = judge_messages(criteria, evidence_standard, render_transcript(turns), system=system, template=template)
    schema = judgment_schema([c.id for c in criteria])
    try:
        completion = client.complete(config, messages, seed=seed, schema=schema, schema_name="judgment",
                                     task=messages.task)
    except ModelError as exc:
        if exc.reason == "unparseable":
            return _unparseable(exc)
        raise
    rows, problem = validate_judgment(completion.parsed, criteria)
    call = call_of(completion)
    if rows is None:
        return {"status": "judge_failed", "reason": problem, "criteria": []}, call
    return {"status": OK, "reason": "", "criteria": rows}, call
