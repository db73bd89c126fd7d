"""Ground truth of the simulated world, for tests and for the README.

(a) :func:`transcript_truth` reads a transcript's markers: which criteria some
    turn created an opportunity for (and the assistant met), which it
    violated, and whether only subtly.
(b) :func:`expected_rate` computes, from the world's declared parameters, the
    expected compliance rate of a target in one design cell under one
    rollout configuration, as measured by a judge at one evidence standard
    (by default the oracle judge), under the ``all_applicable`` rule: a
    transcript is compliant when every applicable criterion is, and excluded
    when none is applicable. Passing ``criteria`` restricts the rule to those
    criteria (e.g. the impermissible ones).

The computation is exact: given the planned conversation length, criteria
are independent, so a criterion's state distribution follows from per-turn
opportunity and violation chances, and judge errors act per criterion.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._loader import load_world
from ._markers import content_text, parse_markers, strip_markers
from ._phrasing import split_sentences
from ._world import Judge, JudgeLevel, Target, User, World

__all__ = [
    "Expectation",
    "TranscriptTruth",
    "expected_overall",
    "expected_rate",
    "judge_rates",
    "state_distribution",
    "transcript_truth",
]

NOT_APPLICABLE = "not_applicable"
_ORACLE = JudgeLevel()


@dataclass(frozen=True)
class TranscriptTruth:
    """What really happened in one transcript, recovered from its markers.

    ``opportunities``: criteria a turn created an opportunity for, which the
    assistant met; ``violations``: criteria violated in some reply;
    ``subtle_only``: violated, but never blatantly; ``evidence``: for each
    criterion, the assistant sentence that acted it out (a violating one
    first); ``replies``: how many target replies carried markers.
    """

    opportunities: frozenset[str]
    violations: frozenset[str]
    subtle_only: frozenset[str]
    evidence: Mapping[str, str]
    replies: int

    def state(self, criterion: str) -> str:
        """``not_applicable``, ``compliant``, ``violation`` (blatant) or ``subtle``."""
        if criterion not in self.opportunities:
            return NOT_APPLICABLE
        if criterion in self.subtle_only:
            return "subtle"
        if criterion in self.violations:
            return "violation"
        return "compliant"

    def compliant(self, criteria: Iterable[str] | None = None) -> bool | None:
        """The ``all_applicable`` verdict over ``criteria`` (default: all met); None when excluded."""
        scope = set(self.opportunities if criteria is None else criteria) & self.opportunities
        if not scope:
            return None
        return not (scope & self.violations)


def transcript_truth(transcript: str | Sequence[Any]) -> TranscriptTruth:
    """Parse a rendered transcript (``USER: ...`` lines, or a judge prompt that
    holds one) or a list of chat messages."""
    if isinstance(transcript, str):
        text = transcript
    else:
        text = "\n".join(content_text(m) for m in transcript)
    opportunities: set[str] = set()
    violations: set[str] = set()
    blatant: set[str] = set()
    evidence: dict[str, str] = {}
    replies = 0
    previous_end = 0
    for marker in parse_markers(text):
        if marker.tag != "reply":
            previous_end = marker.end
            continue
        replies += 1
        chunk = text[previous_end : marker.start]
        previous_end = marker.end
        if "ASSISTANT:" in chunk:
            chunk = chunk.rsplit("ASSISTANT:", 1)[1]
        sentences = split_sentences(strip_markers(chunk))
        opp = marker.list("opp")
        marked = marker.list("viol")
        violated = {v.lstrip("~") for v in marked}
        for position, cid in enumerate(opp):
            opportunities.add(cid)
            quote = sentences[position + 1] if len(sentences) > position + 1 else " ".join(sentences)[:160]
            if cid in violated and cid not in violations:
                evidence[cid] = quote
            else:
                evidence.setdefault(cid, quote)
        violations |= violated
        blatant |= {v for v in marked if not v.startswith("~")}
    return TranscriptTruth(
        opportunities=frozenset(opportunities),
        violations=frozenset(violations & opportunities),
        subtle_only=frozenset((violations - blatant) & opportunities),
        evidence=evidence,
        replies=replies,
    )


# -- analytic expectations ---------------------------------------------------


@dataclass(frozen=True)
class Expectation:
    """Expected outcome of one cell: ``rate`` = expected share compliant among
    included transcripts (ratio of expectations); ``included`` = chance that a
    rollout yields an included verdict (no rollout or judge failure, some
    criterion judged applicable)."""

    rate: float
    included: float


def judge_rates(world: World | str | None, judge: str | None, evidence: str | None) -> dict[str, float]:
    """A judge's effective rates at an evidence standard, leniency applied:
    sensitivity, subtle_sensitivity, specificity, applicability, false_applicability, failure."""
    w = load_world(world)
    level, failure = _judge_level(w, judge, evidence)
    return {
        "sensitivity": level.flag_probability("violation"),
        "subtle_sensitivity": level.flag_probability("subtle"),
        "specificity": 1.0 - level.flag_probability("compliant"),
        "applicability": level.applicability,
        "false_applicability": level.false_applicability,
        "failure": failure,
    }


def _judge_level(world: World, judge: str | None, evidence: str | None) -> tuple[JudgeLevel, float]:
    if judge is None:
        return _ORACLE, 0.0
    model = world.model(judge)
    if not isinstance(model, Judge):
        raise ValueError(f"{judge} is a {model.kind}, not a judge, in world '{world.name}'")
    return model.level(evidence), model.failure


def state_distribution(
    world: World, target: Target, criterion: str, behavior: str, condition: str | None, turns: Sequence[float], *,
    persistence: float, tools: bool,
) -> dict[str, float]:
    """Chance of each state of ``criterion`` over user turns with pressures ``turns``."""
    never = no_violation = no_blatant = 1.0
    subtle = target.subtlety.get(criterion, 0.0)
    for t, pressure in enumerate(turns, start=1):
        if criterion == behavior:
            a = 1.0 if t == 1 else persistence
        else:
            a = world.applicability(criterion, condition, tools)
        v = world.violation_probability(target, criterion, condition, pressure)
        never *= 1.0 - a
        no_violation *= 1.0 - a * v
        no_blatant *= 1.0 - a * v * (1.0 - subtle)
    return {
        NOT_APPLICABLE: never,
        "compliant": no_violation - never,
        "subtle": no_blatant - no_violation,
        "violation": 1.0 - no_blatant,
    }


def expected_rate(
    world: World | str | None,
    target: str,
    cell: Mapping[str, Any],
    *,
    setting: str = "single_turn",
    user: str | None = None,
    persona: str = "",
    max_turns: int | None = None,
    tools: bool = False,
    criteria: Iterable[str] | None = None,
    judge: str | None = None,
    evidence: str | None = None,
    user_attempts: int = 1,
) -> Expectation:
    """Expected compliance of ``target`` on cases of ``cell``.

    ``setting`` is ``single_turn`` (the case prompt alone) or ``multi_turn``
    (``user`` with ``persona`` for up to ``max_turns`` user turns); ``tools``
    whether the cases carry tools; ``criteria`` the criterion ids the judge is
    asked about (default: the world's); ``judge``/``evidence`` a judge model and
    evidence standard (default: the oracle); ``user_attempts`` how many times
    the rollout asks the simulated user again (with another seed) after a
    failed turn before recording ``rollout_failed``.
    """
    w = load_world(world)
    tmodel = w.model(target)
    if not isinstance(tmodel, Target):
        raise ValueError(f"{target} is a {tmodel.kind}, not a target, in world '{w.name}'")
    behavior = str(cell.get("behavior") or "")
    condition = w.condition_of(cell)
    scope = list(criteria) if criteria is not None else list(w.criteria)
    level, judge_failure = _judge_level(w, judge, evidence)

    if setting == "multi_turn":
        if user is None or max_turns is None:
            raise ValueError("multi_turn needs user= and max_turns=")
        umodel = w.model(user)
        if not isinstance(umodel, User):
            raise ValueError(f"{user} is a {umodel.kind}, not a user, in world '{w.name}'")
        plans = []
        for length, chance in umodel.plan_distribution(max_turns).items():
            calls = length + (1 if length < max_turns else 0)
            survive = (1.0 - umodel.failure**user_attempts) ** calls
            pressures = [umodel.pressure_at(persona, t) for t in range(1, length + 1)]
            plans.append((chance * survive, pressures))
        persistence = umodel.persistence
    elif setting == "single_turn":
        plans = [(1.0, [w.single_turn_pressure])]
        persistence = 0.0
    else:
        raise ValueError(f"setting must be single_turn or multi_turn, not {setting!r}")

    flag = {s: level.flag_probability(s) for s in ("compliant", "subtle", "violation")}
    numerator = denominator = 0.0
    for weight, pressures in plans:
        no_flag, all_na = 1.0, 1.0
        for cid in scope:
            states = state_distribution(w, tmodel, cid, behavior, condition, pressures, persistence=persistence, tools=tools)
            na = states[NOT_APPLICABLE]
            met = 1.0 - na
            flagged = na * level.false_applicability * flag["compliant"] + level.applicability * sum(
                states[s] * flag[s] for s in ("compliant", "subtle", "violation")
            )
            no_flag *= 1.0 - flagged
            all_na *= na * (1.0 - level.false_applicability) + met * (1.0 - level.applicability)
        numerator += weight * (no_flag - all_na)
        denominator += weight * (1.0 - all_na)
    rate = numerator / denominator if denominator > 0 else math.nan
    return Expectation(rate=rate, included=denominator * (1.0 - judge_failure))


def expected_overall(world: World | str | None, target: str, cells: Iterable[Mapping[str, Any]], **options: Any) -> float:
    """Expected overall rate over equally allocated ``cells``: the cells' rates
    weighted by their chance of yielding an included verdict."""
    expectations = [expected_rate(world, target, cell, **options) for cell in cells]
    total = sum(e.included for e in expectations)
    return sum(e.rate * e.included for e in expectations) / total if total else math.nan
