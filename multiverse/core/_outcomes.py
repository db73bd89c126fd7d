"""How each work unit of a run ended: the one definition of the counts every table shows.

Every unit of a stage (a case draft, a rollout, a judge call) ends in exactly
one of four outcomes, so ``units = computed + stored + failed + blocked`` in
the manifest, the run summary, ``plan`` and the report:

- **computed** — this run made its calls and got a usable result;
- **stored** — a usable result was already in the store and reused (no call);
- **failed** — attempted and without a usable result: a transport failure
  after retries (not stored: a later run retries it) or a failed result such
  as a simulated user breaking role or an unparseable judge answer (stored:
  it is a result). Counted by reason class;
- **blocked** — never attempted, because a unit it reads failed (a rollout
  whose case was not drafted, a judge call whose transcript failed).

``excluded`` is not an outcome of a unit: it is a verdict (no criterion
applied), a result of scoring by design.

Reasons are kept whole sentences: :func:`short_reason` shortens at a sentence
or word boundary and says so, never mid-word.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ._vocabulary import OK

__all__ = ["DEFINITIONS", "OUTCOMES", "check_tally", "failure_examples", "reason_class", "row_outcomes", "short_reason",
           "tally", "unit_outcomes"]

OUTCOMES = ("computed", "stored", "failed", "blocked")

DEFINITIONS = {
    "computed": "made by this run and usable",
    "stored": "found usable in the store and reused, no call made",
    "failed": "attempted without a usable result (transport failures are retried next run; failed results are stored)",
    "blocked": "not attempted because a unit it reads failed",
}

_CLASS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def reason_class(reason: str | None) -> str:
    """The short class of a failure reason: ``"not_found: sim/x: ..."`` -> ``"not_found"``.

    A reason that does not start with a class word (a free-text judge
    problem, say) is its own class, shortened.
    """
    text = " ".join(str(reason or "").split())
    if not text:
        return "unknown"
    match = _CLASS.match(text)
    if match:
        rest = text[match.end():]
        if not rest or rest.startswith((":", "(", " (")):
            return match.group(0)
    return short_reason(text, 60)


def short_reason(text: str, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters, cut at a sentence or word end.

    A cut is marked with " …" so a reader never mistakes a fragment for the
    whole message.
    """
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    room = text[: limit - 2]
    sentence = max(room.rfind(". "), room.rfind("; "))
    if sentence >= limit // 2:
        return room[: sentence + 1] + " …"
    space = room.rfind(" ")
    return (room[:space] if space > 0 else room).rstrip(",;:") + " …"


def tally(outcomes: Mapping[str, tuple[str, str]] | Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Counts of ``(outcome, reason)`` per unit: ``{units, computed, stored, failed, blocked, failures}``.

    ``failures`` maps each reason class to its count; ``blocked_by`` does the
    same for blocked units (what they waited on).
    """
    items = list(outcomes.values()) if isinstance(outcomes, Mapping) else list(outcomes)
    counts = Counter(outcome for outcome, _ in items)
    unknown = set(counts) - set(OUTCOMES)
    if unknown:
        raise ValueError(f"unknown outcome(s) {sorted(unknown)}; expected one of {OUTCOMES}")
    failures = Counter(reason_class(reason) for outcome, reason in items if outcome == "failed")
    blocked_by = Counter(reason_class(reason) for outcome, reason in items if outcome == "blocked")
    out: dict[str, Any] = {"units": len(items), **{o: int(counts.get(o, 0)) for o in OUTCOMES}}
    out["failures"] = dict(sorted(failures.items(), key=lambda kv: (-kv[1], kv[0])))
    out["blocked_by"] = dict(sorted(blocked_by.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


def check_tally(counts: Mapping[str, Any]) -> None:
    """Raise if ``counts`` does not add up (a bug, never a user error)."""
    total = sum(int(counts.get(o, 0)) for o in OUTCOMES)
    if total != counts.get("units"):
        raise AssertionError(f"units {counts.get('units')} != computed + stored + failed + blocked = {total}: {dict(counts)}")
    if sum((counts.get("failures") or {}).values()) != counts.get("failed", 0):
        raise AssertionError(f"failures by reason do not sum to failed: {dict(counts)}")


def unit_outcomes(work: Any, records: Mapping[str, Mapping[str, Any]], *, computed: Mapping[str, Iterable[str]] | None = None,
                  failures: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, dict[str, tuple[str, str]]]:
    """Per store stage (case, transcript, judgment): unit key -> (outcome, reason).

    ``records`` are the stored records found for the units; ``computed`` the
    keys this run computed and ``failures`` this run's transport failures (key
    -> reason). A unit with no record, no failure and no failed upstream is
    ``"pending"``: ``plan`` counts it as to compute; after a run it cannot
    occur (the run attempted it).
    """
    computed = {stage: set(keys) for stage, keys in (computed or {}).items()}
    failures = failures or {}
    out: dict[str, dict[str, tuple[str, str]]] = {"case": {}, "transcript": {}, "judgment": {}}

    def settle(stage: str, key: str, upstream: str | None) -> tuple[str, str]:
        record = records.get(stage, {}).get(key)
        if record is not None:
            if record.get("status", OK) != OK:
                return "failed", str(record.get("reason") or "failed")
            return ("computed" if key in computed.get(stage, ()) else "stored"), ""
        if key in failures.get(stage, {}):
            return "failed", failures[stage][key]
        if upstream is not None:
            return "blocked", upstream
        return "pending", ""

    for key, case in work.cases.items():
        if case.given is None:
            out["case"][key] = settle("case", key, None)
    for key, unit in work.transcripts.items():
        case = work.cases[unit.case_key]
        upstream = None if case.given is not None else out["case"][unit.case_key][0]
        out["transcript"][key] = settle("transcript", key, "draft_failed" if upstream in ("failed", "blocked") else None)
    for key, call in work.judge_calls.items():
        # A pairwise call reads the reference system's transcript too: it is blocked when either failed.
        read = (call.transcript_key, *([call.reference_key] if getattr(call, "reference_key", None) else []))
        read_outcomes = {out["transcript"][k][0] for k in read}
        out["judgment"][key] = settle("judgment", key,
                                      "rollout_failed" if read_outcomes & {"failed", "blocked"} else None)
    return out


def row_outcomes(work: Any, outcomes: Mapping[str, Mapping[str, tuple[str, str]]],
                 statuses: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(outcome, reason) of every verdict row (universe x system x case x replicate).

    Scoring makes no call: a row is ``blocked`` when it cannot be scored (its
    rollout failed, or every judge call of it failed), ``computed`` when any
    of its judge calls was made by this run (``pending`` before a run: it is
    to compute), else ``stored``. ``statuses``, after a run, are the verdicts'
    own statuses, so these counts match the verdicts table exactly.
    """
    row_statuses: list[str | None] = list(statuses) if statuses is not None else [None] * len(work.rows)
    out = []
    for row, status in zip(work.rows, row_statuses):
        transcript = outcomes["transcript"][row.transcript_key][0]
        calls = [outcomes["judgment"][k][0] for k in row.judge_calls]
        if status in ("rollout_failed", "judge_failed"):
            out.append(("blocked", status))
        elif status is None and transcript in ("failed", "blocked"):
            out.append(("blocked", "rollout_failed"))
        elif status is None and calls and all(c == "failed" for c in calls):
            out.append(("blocked", "judge_failed"))
        elif "pending" in calls or transcript == "pending":
            out.append(("pending", ""))
        elif "computed" in calls:
            out.append(("computed", ""))
        else:
            out.append(("stored", ""))
    return out


def failure_examples(outcomes: Mapping[str, Mapping[str, tuple[str, str]]]) -> dict[str, list[str]]:
    """Per stage, one whole example message per failure class (for the reader who wants the message)."""
    out = {}
    for stage, units in outcomes.items():
        examples: dict[str, str] = {}
        for outcome, reason in units.values():
            if outcome == "failed":
                examples.setdefault(reason_class(reason), short_reason(reason))
        if examples:
            out[stage] = [examples[k] for k in sorted(examples)][:20]
    return out
