"""The records a run keeps in the store: their types, and their shape checked on every read.

A record is plain JSON (what the store writes); the ``TypedDict`` classes
here name its fields for the code that builds and reads it: a
:class:`CaseRecord` (a drafted case), a :class:`TranscriptRecord` (one
rollout) and a :class:`JudgmentRecord` (one judge sample), each with its
:class:`Provenance` (``multiverse.store._provenance``).

A store directory is shared and outlives the code that wrote it: an entry may
have been hand-edited, written by another version, or planted. The pipeline
indexes records without defensive ``.get`` chains, so a record that parses as
JSON but lacks a field (``{}``) or carries the wrong type would crash every
rerun. Each check here answers ``None`` for a record the pipeline can use, or
one line saying what is wrong; the store quarantines the entry and the unit
is computed again.

Only what the readers rely on is checked: the fields they index and the types
they compute with. Extra fields are fine (later versions may add some).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from numbers import Real
from typing import Any, TypedDict

__all__ = ["SHAPES", "Answer", "Call", "CaseRecord", "CriterionLabel", "JudgmentRecord", "Provenance", "Records",
           "RequestRecord", "TranscriptRecord", "Turn", "problem"]


class Call(TypedDict):
    """One model call as provenance counts it: ``requests`` sent over the wire for it
    (retries and repair requests included; 0 for an answer served from the store)."""

    model_reported: str | None
    usage: dict[str, int]
    cost: float
    requests: int


class _Provenance(TypedDict):
    model_requested: str | None
    model_reported: list[str]
    params: dict[str, Any]
    usage: dict[str, int]
    cost: float
    calls: int
    started: str
    seconds: float
    versions: dict[str, str]


class Provenance(_Provenance, total=False):
    """How a record was made: the model asked for and those that answered, usage, cost, calls, time, versions.

    ``calls`` counts the requests sent over the wire (retries and repair
    requests included); ``reused`` the model calls answered from the request
    store instead (``multiverse.model._requestcache``); records written before
    ``reused`` existed lack it.
    """

    reused: int


class _Case(TypedDict):
    status: str
    case: dict[str, Any]  # title, brief, prompt, system_prompt, tools


class CaseRecord(_Case, total=False):
    """A drafted test case (a case from a cases file is never stored)."""

    case_id: str
    cell: dict[str, str]
    provenance: Provenance


class Turn(TypedDict, total=False):
    """One message of a transcript: user, assistant (maybe with tool calls) or tool."""

    role: str
    content: str | None
    tool_calls: list[dict[str, Any]]  # [{id, name, arguments}]
    tool_call_id: str
    name: str


class _Transcript(TypedDict):
    status: str  # ok | rollout_failed
    reason: str
    turns: list[Turn]


class TranscriptRecord(_Transcript, total=False):
    """One rollout of one case on one system."""

    stop_reason: str  # completed | user_ended | max_turns
    system: str
    provenance: Provenance


class CriterionLabel(TypedDict):
    """One criterion's labels in a judgment."""

    criterion: str
    permissible: bool
    applicable: bool
    compliant: bool | None
    rationale: str


class _Judgment(TypedDict):
    status: str  # ok | judge_failed
    reason: str
    criteria: list[CriterionLabel]


class JudgmentRecord(_Judgment, total=False):
    """One judge sample's labels of one transcript (a scored judge: its score, rationale and, for a pair, position)."""

    sample: int
    provenance: Provenance
    score: float  # as the judge gave it: for a pair, the preference for the transcript shown first
    rationale: str
    position: str  # pairwise: ab (the system's transcript shown first) or ba


class Answer(TypedDict):
    """A model's answer as the request store keeps it."""

    text: str
    parsed: Any
    tool_calls: list[dict[str, Any]]
    model_reported: str


class RequestRecord(TypedDict):
    """One model request's answer (``multiverse.model._requestcache``), served to every identical request."""

    status: str  # ok: only answers are stored, never failures
    reason: str
    answer: Answer
    provenance: dict[str, Any]  # model requested and reported, usage, cost, calls, seconds of the one request


class Records(TypedDict):
    """Every record a run reads, per store stage, by key."""

    case: dict[str, CaseRecord]
    transcript: dict[str, TranscriptRecord]
    judgment: dict[str, JudgmentRecord]


def _provenance(record: Mapping[str, Any]) -> str | None:
    provenance = record.get("provenance")
    if provenance is None:
        return None
    if not isinstance(provenance, Mapping):
        return "provenance: expected an object"
    if not all(_number(provenance.get(f, 0) or 0) for f in ("calls", "cost", "reused")):
        return "provenance: expected numeric calls, cost and reused"
    usage = provenance.get("usage", {})
    if not isinstance(usage, Mapping) or not all(v is None or _number(v) for v in usage.values()):
        return "provenance.usage: expected an object of token counts"
    models = provenance.get("model_reported", [])
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        return "provenance.model_reported: expected a list of model names"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _status(record: Mapping[str, Any]) -> str | None:
    if not isinstance(record.get("status"), str):
        return "status: expected a string"
    if not isinstance(record.get("reason", ""), str):
        return "reason: expected a string"
    return None


def _case(record: Mapping[str, Any]) -> str | None:
    if not isinstance(record.get("case"), Mapping):
        return "case: expected an object"
    if not isinstance(record.get("cell", {}), Mapping):
        return "cell: expected an object"
    return None


def _transcript(record: Mapping[str, Any]) -> str | None:
    turns = record.get("turns")
    if not isinstance(turns, list):
        return "turns: expected a list"
    for i, turn in enumerate(turns):
        if not isinstance(turn, Mapping) or not isinstance(turn.get("role"), str):
            return f"turns[{i}]: expected an object with a role"
    return None


def _judgment(record: Mapping[str, Any]) -> str | None:
    if "score" in record and (isinstance(record["score"], bool) or not _number(record["score"])):
        return "score: expected a number"
    if record.get("position", "ab") not in ("ab", "ba"):
        return "position: expected ab or ba"
    if not isinstance(record.get("rationale", ""), str):
        return "rationale: expected a string"
    criteria = record.get("criteria")
    if not isinstance(criteria, list):
        return "criteria: expected a list"
    for i, row in enumerate(criteria):
        if not isinstance(row, Mapping) or not isinstance(row.get("criterion"), str):
            return f"criteria[{i}]: expected an object with a criterion id"
        if not all(isinstance(row.get(f), bool) for f in ("permissible", "applicable")):
            return f"criteria[{i}]: expected boolean permissible and applicable"
        if row.get("compliant") is not None and not isinstance(row.get("compliant"), bool):
            return f"criteria[{i}].compliant: expected true, false or null"
        if not isinstance(row.get("rationale", ""), str):
            return f"criteria[{i}].rationale: expected a string"
    return None


def _request(record: Mapping[str, Any]) -> str | None:
    answer = record.get("answer")
    if not isinstance(answer, Mapping):
        return "answer: expected an object"
    if not isinstance(answer.get("text"), str) or not isinstance(answer.get("model_reported"), str):
        return "answer: expected a text and a model_reported string"
    calls = answer.get("tool_calls", [])
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in calls):
        return "answer.tool_calls: expected a list of calls with a name"
    return None


def _checks(*parts: Callable[[Mapping[str, Any]], str | None]) -> Callable[[Any], str | None]:
    def check(record: Any) -> str | None:
        if not isinstance(record, Mapping):
            return f"expected a JSON object, got {type(record).__name__}"
        for part in (_status, *parts, _provenance):
            found = part(record)
            if found:
                return found
        return None

    return check


#: store stage -> check(record) -> None or what is wrong
SHAPES: dict[str, Callable[[Any], str | None]] = {
    "case": _checks(_case),
    "transcript": _checks(_transcript),
    "judgment": _checks(_judgment),
    "request": _checks(_request),
}


def problem(stage: str, record: Any) -> str | None:
    """What is wrong with ``record`` as an entry of ``stage`` (``None``: usable)."""
    check = SHAPES.get(stage)
    if check is None:
        return None if isinstance(record, Mapping) else f"expected a JSON object, got {type(record).__name__}"
    return check(record)
