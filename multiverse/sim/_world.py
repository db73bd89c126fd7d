"""The simulated audit world: a YAML file that declares every latent parameter.

A world names its rubric criteria (with the text the simulated generator drafts
and the phrases simulated users and targets speak), its interaction conditions
and scenario topics, a tool catalogue, and the models that live in it, each
with a ``kind``:

``generator``       drafts rubrics and cases
``target``          a system under audit: violation propensities per criterion
``user``            a simulated user: pressure, personas, failure rate
``judge``           per evidence-standard sensitivity, specificity, ...
``tool_simulator``  answers tool calls

This module holds the loaded world's types; :mod:`multiverse.sim._loader`
reads and validates world files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from multiverse.core import SIM_PREFIX

from ..errors import SpecError

__all__ = [
    "Condition",
    "Criterion",
    "Generator",
    "Judge",
    "JudgeLevel",
    "Model",
    "Scoring",
    "Target",
    "ToolSimulator",
    "User",
    "World",
    "frozen",
]


def frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy of ``mapping`` (world objects are immutable)."""
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Criterion:
    """A rubric criterion as the world knows it, with the phrases that act it out.

    ``applicability`` is the chance that one turn creates an opportunity for
    the criterion when it is not the cell's behaviour. ``probes`` are user
    lines that create the opportunity; ``replies`` maps an outcome
    (``compliant``, ``violation``, ``subtle``, optionally
    ``compliant_with_tool``) to one-sentence assistant templates.
    """

    id: str
    name: str
    permissible: bool
    definition: str
    examples: tuple[str, ...]
    evidence: Mapping[str, str]
    applicability: float
    probes: tuple[str, ...]
    replies: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Condition:
    """An interaction condition: how often it raises each criterion's opportunity
    (``applicability`` overrides), how it shifts every target's odds of a
    violation (``propensity`` odds multipliers), the user cues that set it up and
    its scenario topics (mappings of template slots)."""

    id: str
    description: str
    applicability: Mapping[str, float]
    propensity: Mapping[str, float]
    cues: tuple[str, ...]
    topics: tuple[Mapping[str, str], ...]


@dataclass(frozen=True)
class Target:
    """A system under audit.

    The odds that an opportunity for criterion ``c`` at pressure ``p`` under
    condition ``k`` turns into a violation (impermissible: the behaviour is
    exhibited; permissible: it is omitted) are
    ``odds(propensity[c]) * condition[k] * world.conditions[k].propensity[c] * exp(pressure_sensitivity * p)``.
    ``subtlety[c]`` is the share of violations phrased so that only a lenient
    evidence standard tends to catch them.
    """

    name: str
    propensity: Mapping[str, float]
    subtlety: Mapping[str, float]
    condition: Mapping[str, float]
    pressure_sensitivity: float
    openers: tuple[str, ...]
    closers: tuple[str, ...]
    kind: str = "target"


@dataclass(frozen=True)
class User:
    """A simulated user.

    ``pressure`` (0..1) applies unless the persona names its own; each later
    turn adds ``escalation``. ``persistence`` is the chance a later turn
    re-probes the cell's behaviour. With chance ``end_early`` the user plans a
    conversation shorter than ``max_turns`` (uniform over ``min_turns`` ..
    ``max_turns - 1``) and closes with the end marker. Each call fails with
    chance ``failure``; ``failure_modes`` weighs ``empty`` against
    ``role_reversal``.
    """

    name: str
    pressure: float
    escalation: float
    persistence: float
    end_early: float
    min_turns: int
    failure: float
    failure_modes: Mapping[str, float]
    personas: Mapping[str, float]
    kind: str = "user"

    def persona_pressure(self, persona: str | None) -> float:
        """Pressure of ``persona`` (the user's own when unnamed or unknown)."""
        return self.personas.get(persona or "", self.pressure)

    def pressure_at(self, persona: str | None, turn: int) -> float:
        """Pressure of user turn ``turn`` (1-based): the persona's plus escalation, within 0..1."""
        return min(1.0, max(0.0, self.persona_pressure(persona) + self.escalation * (turn - 1)))

    def plan_distribution(self, max_turns: int) -> dict[int, float]:
        """Chance of each planned conversation length (substantive user turns).

        With chance ``end_early`` the plan is uniform on ``min_turns .. max_turns - 1``
        (when that range is not empty), otherwise it is ``max_turns``.
        """
        if max_turns <= 1:
            return {1: 1.0}
        low, high = self.min_turns, max_turns - 1
        early = self.end_early if low <= high else 0.0
        plan = {n: early / (high - low + 1) for n in range(low, high + 1)} if early else {}
        plan[max_turns] = plan.get(max_turns, 0.0) + 1.0 - early
        return plan


@dataclass(frozen=True)
class JudgeLevel:
    """A judge's declared rates under one evidence standard.

    ``sensitivity``: chance of flagging a (blatantly) violated criterion;
    ``subtle_sensitivity``: the same for a criterion violated only subtly;
    ``specificity``: chance of not flagging an applicable, compliant criterion;
    ``applicability``: chance of seeing an opportunity that was there;
    ``false_applicability``: chance of seeing one that was not;
    ``leniency`` in [-1, 1]: a bias applied on top, shrinking every flag
    probability by that share (negative: raising it toward 1).
    """

    sensitivity: float = 1.0
    subtle_sensitivity: float = 1.0
    specificity: float = 1.0
    applicability: float = 1.0
    false_applicability: float = 0.0
    leniency: float = 0.0

    def flag_probability(self, state: str) -> float:
        """Chance of labelling non-compliant a criterion it judged applicable,
        given the truth ``state``: ``violation``, ``subtle`` or ``compliant``."""
        raw = {
            "violation": self.sensitivity,
            "subtle": self.subtle_sensitivity,
            "compliant": 1.0 - self.specificity,
        }[state]
        if self.leniency >= 0:
            return raw * (1.0 - self.leniency)
        return raw + (1.0 - raw) * -self.leniency


@dataclass(frozen=True)
class Scoring:
    """How a judge scores when its prompt asks for a score (``judge.scale`` not binary).

    It reads a transcript's true quality from its markers (1, less ``violation`` per blatantly
    and ``subtle`` per only subtly violated criterion, at least 0), adds ``bias`` and a normal
    draw of sd ``noise`` and puts the result, within [0, 1], on the scale (an ordinal scale
    rounds it). A pairwise judge prefers transcript A by the difference of the two qualities,
    plus ``position_bias`` toward the transcript shown first and the same noise: as a
    ``preference`` (0.5 + difference, within [0, 1], on the scale) or an ``outcome`` (a win, a
    loss, or a tie when the difference is within ``tie``). With chance ``off_scale`` it answers
    a score off the scale (a failure, never a score).
    """

    bias: float = 0.0
    noise: float = 0.1
    violation: float = 0.5
    subtle: float = 0.25
    position_bias: float = 0.0
    tie: float = 0.1
    pairwise: str = "outcome"
    off_scale: float = 0.0


@dataclass(frozen=True)
class Judge:
    """A judge: rates per evidence-standard level, a failure rate (unparseable output) and how it scores."""

    name: str
    levels: Mapping[str, JudgeLevel]
    default: JudgeLevel
    failure: float
    scores: Scoring = Scoring()
    kind: str = "judge"

    def level(self, evidence_standard: str | None) -> JudgeLevel:
        """The rates for ``evidence_standard``; an undeclared standard uses the top-level values."""
        return self.levels.get(evidence_standard or "", self.default)


@dataclass(frozen=True)
class Generator:
    """Drafts rubrics (``examples`` per criterion, ``discarded`` alternatives) and cases."""

    name: str
    examples: int = 2
    discarded: int = 3
    kind: str = "generator"


@dataclass(frozen=True)
class ToolSimulator:
    """Answers a tool call with a small JSON result."""

    name: str
    empty_rate: float = 0.15
    kind: str = "tool_simulator"


Model = Target | User | Judge | Generator | ToolSimulator


@dataclass(frozen=True)
class World:
    """A loaded world. ``digest`` hashes its parsed content and labels every output."""

    name: str
    source: str
    digest: str
    description: str
    criteria: Mapping[str, Criterion]
    conditions: Mapping[str, Condition]
    topics: tuple[Mapping[str, str], ...]
    tools: tuple[Mapping[str, Any], ...]
    discarded: tuple[Mapping[str, str], ...]
    single_turn_pressure: float
    tool_applicability: Mapping[str, float]
    default_pressure: float
    openers: tuple[str, ...]
    closers: tuple[str, ...]
    dialogue: Mapping[str, tuple[str, ...]]
    models: Mapping[str, Model] = field(repr=False)

    def model(self, name: str) -> Model:
        """The model called ``name`` (with or without the ``sim/`` prefix)."""
        short = name.removeprefix(SIM_PREFIX)
        try:
            return self.models[short]
        except KeyError:
            raise SpecError(
                self.source, f"models.{short}", f"a model declared in world '{self.name}' ({', '.join(self.models)})"
            ) from None

    def reported(self, name: str) -> str:
        """The model name a response reports: ``sim/<name>@<world digest>``."""
        return f"{SIM_PREFIX}{name.removeprefix(SIM_PREFIX)}@{self.digest}"

    def condition_of(self, cell: Mapping[str, Any]) -> str | None:
        """The interaction condition of a design cell: the first factor level that names one."""
        level = cell.get("interaction_condition")
        if isinstance(level, str) and level in self.conditions:
            return level
        for key, value in cell.items():
            if key != "behavior" and isinstance(value, str) and value in self.conditions:
                return value
        return None

    def applicability(self, criterion: str, condition: str | None, tools: bool) -> float:
        """Per-turn chance that a turn creates an opportunity for ``criterion``."""
        if tools and criterion in self.tool_applicability:
            return self.tool_applicability[criterion]
        known = self.conditions.get(condition or "")
        if known is not None and criterion in known.applicability:
            return known.applicability[criterion]
        crit = self.criteria.get(criterion)
        return crit.applicability if crit is not None else 0.0

    def violation_probability(self, target: Target, criterion: str, condition: str | None, pressure: float) -> float:
        """Chance that ``target`` violates ``criterion`` at one opportunity (see :class:`Target`)."""
        base = target.propensity.get(criterion, 0.0)
        if base <= 0.0 or base >= 1.0:
            return min(max(base, 0.0), 1.0)
        log_odds = math.log(base / (1.0 - base)) + target.pressure_sensitivity * pressure
        log_odds += math.log(target.condition.get(condition or "", 1.0))
        known = self.conditions.get(condition or "")
        if known is not None:
            log_odds += math.log(known.propensity.get(criterion, 1.0))
        return 1.0 / (1.0 + math.exp(-log_odds))

    def topic(self, key: str | None) -> Mapping[str, str]:
        """The topic a marker names (``<condition>.<index>`` or ``_.<index>``); the first generic one otherwise."""
        pool, index = self.topics, 0
        if key and "." in key:
            cond, _, idx = key.rpartition(".")
            if cond in self.conditions and self.conditions[cond].topics:
                pool = self.conditions[cond].topics
            if idx.isdigit():
                index = int(idx)
        return pool[index % len(pool)]

    def topic_pool(self, condition: str | None) -> tuple[str, tuple[Mapping[str, str], ...]]:
        """(prefix, topics) for a condition, falling back to the generic topics."""
        known = self.conditions.get(condition or "")
        if known is not None and known.topics:
            return known.id, known.topics
        return "_", self.topics
