"""How many work units a set of universes needs, counted without listing universes x cases.

``build_work`` makes one object per unit and one row per verdict, which at
scale is gigabytes before the first call. These counts come from each
universe's distinct stage configurations instead, with the keys' own rules
(``multiverse.work``):

- a case is (its inputs digest, cell, index), so a drafted cell with the same
  inputs in several universes is ``max(count)`` cases; a case from a file is
  its content;
- a transcript is (case, rollout digest, replicate): per (case block,
  rollout digest) the transcripts are the union, over the universes that
  share them, of ``[0, cases) x [0, replicates)``, an anchored staircase;
- a judge call is (transcript, judge digest, sample): the same union in
  three dimensions.

Memory grows with the distinct (cell, rollout, judge) configurations, never
with cases x replicates x universes; tests check the counts equal
``build_work``'s on grids whose universes share and overlap in every way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from multiverse.core import digest
from multiverse.engine._plan import Plan, StagePlan, make_plan
from multiverse.model import TOKENS, estimate_cost
from multiverse.spec import Spec, Universe, axis_stages, case_counts, to_yaml_dict
from multiverse.work import case_inputs, judge_inputs, positions, rollout_inputs, template_digests

__all__ = ["WorkCount", "calls_per_transcript", "count_work", "counted_plan"]

#: a model and its server: a lane a run paces
Endpoint = tuple[str, str | None]
#: The plan's stage names for the store's.
PLAN_STAGES = {"case": "draft", "transcript": "rollout", "judgment": "judge"}


def calls_per_transcript(setting: str, max_turns: int) -> int:
    """A user and a system call per turn, before retries, tool calls and early ends."""
    return 1 if setting == "single_turn" else 2 * max_turns


@dataclass
class WorkCount:
    """Unique units per stage (``case``, ``transcript``, ``judgment``), their calls and estimated cost, and verdict rows."""

    units: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)
    rows: int = 0
    naive_calls: int = 0
    #: calls and rough tokens per (model, api_base), every unit's: what a run paces per provider
    calls_by_endpoint: dict[Endpoint, int] = field(default_factory=dict)
    tokens_by_endpoint: dict[Endpoint, int] = field(default_factory=dict)

    def add(self, endpoint: Endpoint, calls: int, tokens: tuple[int, int]) -> None:
        """``calls`` more calls of ``tokens`` (prompt, completion) each at ``endpoint``."""
        self.calls_by_endpoint[endpoint] = self.calls_by_endpoint.get(endpoint, 0) + calls
        self.tokens_by_endpoint[endpoint] = self.tokens_by_endpoint.get(endpoint, 0) + calls * sum(tokens)

    @property
    def total(self) -> int:
        return sum(self.units.values())

    def describe(self) -> str:
        return (f"{self.total:,} work units ({self.units['case']:,} case drafts, {self.units['transcript']:,} transcripts, "
                f"{self.units['judgment']:,} judge calls)")


def _union_volume(boxes: Iterable[tuple[int, ...]]) -> int:
    """The number of integer points in the union of boxes ``[0, a) x [0, b) x ...``."""
    boxes = set(boxes)
    if not boxes:
        return 0
    if len(next(iter(boxes))) == 1:
        return max(b[0] for b in boxes)
    total, below = 0, 0
    # Slab by slab along the first axis: the boxes reaching past a slab's start cover it.
    for edge in sorted({b[0] for b in boxes}):
        total += (edge - below) * _union_volume(b[1:] for b in boxes if b[0] >= edge)
        below = edge
    return total


def count_work(universes: Iterable[Universe], stages: Mapping[str, str] | None = None) -> WorkCount:
    """Unique work units, calls, estimated cost and verdict rows of ``universes``, from their stage configurations.

    ``stages`` (``grid.axis_stages(spec)``) lets universes that differ only in
    later stages reuse what earlier ones worked out: a universe's cases and
    rollouts depend only on its draft and rollout axes, its judge calls only
    on the axes before scoring.
    """
    census = _Census(template_digests())
    shortcuts = _Shortcuts(stages)
    for universe in universes:
        scored = shortcuts.before_scoring(universe)
        if scored is not None and scored in shortcuts.done:
            # Its units are another universe's; only its verdict rows are its own.
            rows, naive = shortcuts.done[scored]
        else:
            rows, naive = census.add(universe.spec, shortcuts.rollout_profile(universe, census))
            if scored is not None:
                shortcuts.done[scored] = (rows, naive)
        census.rows += rows
        census.naive_calls += naive
    return census.count()


#: a universe's transcripts: ([(case block, rollout digest, cases, system)] per system, replicates, calls per transcript)
_Profile = tuple[list[tuple[tuple[Any, ...], str, int, str]], int, int]


class _Shortcuts:
    """What a universe may reuse of another's, by the options of the axes before a stage (with ``stages``)."""

    def __init__(self, stages: Mapping[str, str] | None):
        self._on = stages is not None
        self._upstream = [a for a, st in (stages or {}).items() if st in ("draft", "rollout")]
        self._unscored = [a for a, st in (stages or {}).items() if st != "score"]
        self._rollouts: dict[tuple[Any, ...], _Profile] = {}  # upstream options -> a universe's rollout profile
        #: options before scoring -> (rows, naive calls) of a universe
        self.done: dict[tuple[Any, ...], tuple[int, int]] = {}

    def before_scoring(self, universe: Universe) -> tuple[Any, ...] | None:
        return tuple(universe.options.get(a) for a in self._unscored) if self._on else None

    def rollout_profile(self, universe: Universe, census: _Census) -> _Profile:
        if not self._on:
            return census.rollout_profile(universe.spec)
        key = tuple(universe.options.get(a) for a in self._upstream)
        if key not in self._rollouts:
            self._rollouts[key] = census.rollout_profile(universe.spec)
        return self._rollouts[key]


@dataclass
class _Census:
    """The distinct stage configurations of a grid's universes, gathered one universe at a time."""

    templates: dict[str, str]
    drafted: dict[tuple[Any, ...], int] = field(default_factory=dict)  # (inputs, cell) -> most cases any universe drafts there
    draft_model: dict[str, Endpoint] = field(default_factory=dict)  # inputs -> generator (model, api_base)
    transcripts: dict[tuple[Any, ...], set[Any]] = field(default_factory=dict)  # (block, rollout) -> {(cases, replicates)}
    judged: dict[tuple[Any, ...], set[Any]] = field(default_factory=dict)  # (block, rollout, judge) -> {(cases, replicates, samples)}
    #: rollout -> (calls per transcript, {endpoint: its calls}, models)
    rollout_calls: dict[str, tuple[int, dict[Endpoint, int], list[str]]] = field(default_factory=dict)
    judge_model: dict[str, Endpoint] = field(default_factory=dict)
    given: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], int, bool]]] = field(default_factory=dict)  # a cases file's blocks, by content
    rows: int = 0
    naive_calls: int = 0

    def add(self, u: Any, profile: _Profile) -> tuple[int, int]:
        """A universe's transcripts and judge calls as boxes; returns its (verdict rows, naive calls)."""
        entries, replicates, per_transcript = profile
        judge, jd = judge_inputs(u, self.templates)
        self.judge_model[jd] = (judge.model, judge.api_base)
        samples = u.judge.samples
        scale = u.judge.scale
        pair = scale.type == "pairwise"
        # A pair's judge calls read the reference system's rollout of the same block too, once per position.
        reference = {block: rd for block, rd, _, name in entries if name == scale.reference} if pair else {}
        shown = positions(u.judge.order) if pair else ("ab",)
        rows = naive = 0
        for block, rd, size, name in entries:
            self.transcripts.setdefault((block, rd), set()).add((size, replicates))
            rows += size * replicates
            judged = not (pair and name == scale.reference and not scale.compare_reference)
            for position in shown if judged else ():
                key = (block, rd, jd, reference[block], position) if pair else (block, rd, jd)
                self.judged.setdefault(key, set()).add((size, replicates, samples))
            calls = samples * len(shown) if judged else 0
            naive += size * replicates * ((block[0] == "drafted") + per_transcript + calls)
        return rows, naive

    def count(self) -> WorkCount:
        """The units, calls and cost of every configuration gathered."""
        out = WorkCount(rows=self.rows, naive_calls=self.naive_calls)
        self._count_cases(out)
        self._count_transcripts(out)
        self._count_judgments(out)
        return out

    def _count_cases(self, out: WorkCount) -> None:
        out.units["case"] = sum(self.drafted.values())
        out.calls["case"] = out.units["case"]
        out.cost["case"] = sum(estimate_cost(self.draft_model[inputs][0], n, *TOKENS["draft"])
                               for (inputs, _), n in self.drafted.items())
        for (inputs, _), n in self.drafted.items():
            out.add(self.draft_model[inputs], n, TOKENS["draft"])

    def _count_transcripts(self, out: WorkCount) -> None:
        out.units["transcript"], out.calls["transcript"], out.cost["transcript"] = 0, 0, 0.0
        for (_, rd), boxes in self.transcripts.items():
            n = _union_volume(boxes)
            per, endpoints, models = self.rollout_calls[rd]
            out.units["transcript"] += n
            out.calls["transcript"] += n * per
            # As forecast does: each model of the rollout is priced for all its calls.
            out.cost["transcript"] += sum(estimate_cost(m, n * per, *TOKENS["rollout"]) for m in models)
            for endpoint, calls in endpoints.items():
                out.add(endpoint, n * calls, TOKENS["rollout"])

    def _count_judgments(self, out: WorkCount) -> None:
        out.units["judgment"], out.cost["judgment"] = 0, 0.0
        for key, boxes in self.judged.items():
            jd = key[2]
            n = _union_volume(boxes)
            out.units["judgment"] += n
            out.cost["judgment"] += estimate_cost(self.judge_model[jd][0], n, *TOKENS["judge"])
            out.add(self.judge_model[jd], n, TOKENS["judge"])
        out.calls["judgment"] = out.units["judgment"]

    def rollout_profile(self, u: Any) -> _Profile:
        """A universe's transcripts as ([(case block, rollout digest, cases)] per system, replicates, calls per transcript)."""
        blocks = self._case_blocks(u)
        per_transcript = calls_per_transcript(u.rollout.setting, u.rollout.max_turns)
        memo: dict[tuple[Any, ...], str] = {}
        entries = []
        for system in u.systems:
            for block, size, tools in blocks:
                possible = bool(system.tools) or bool(u.design.tools) or tools
                if (system.name, possible) not in memo:
                    memo[(system.name, possible)] = self._rollout(u, system, possible, per_transcript)
                entries.append((block, memo[(system.name, possible)], size, system.name))
        return entries, u.rollout.replicates, per_transcript

    def _rollout(self, u: Any, system: Any, tools_possible: bool, per_transcript: int) -> str:
        """The digest of one system's rollout in a universe, its calls per endpoint noted."""
        rd, configs = rollout_inputs(u, system, tools_possible, self.templates)
        multi = u.rollout.setting == "multi_turn"
        # A user and a system call per turn; one system call in a single turn.
        system_end = (configs["system"].model, configs["system"].api_base)
        endpoints = {system_end: 1 if not multi else u.rollout.max_turns}
        if multi:
            user_end = (configs["user"].model, configs["user"].api_base)
            endpoints[user_end] = endpoints.get(user_end, 0) + u.rollout.max_turns
        models = [configs["system"].model] + ([configs["user"].model] if multi else [])
        self.rollout_calls[rd] = (per_transcript, endpoints, models)
        return rd

    def _case_blocks(self, u: Any) -> list[tuple[tuple[Any, ...], int, bool]]:
        """A universe's cases as (block, cases in it, whether they bring tools): a drafted cell, or one case from a file."""
        if u.cases is not None:
            # A case from a file is its own block; its tools make tool calls possible.
            contents = [to_yaml_dict(c) for c in u.cases]
            memo = ("given", digest(contents))
            if memo not in self.given:
                self.given[memo] = [(("given", digest({"case": c})), 1, bool(c.get("tools"))) for c in contents]
            return self.given[memo]
        generator, inputs = case_inputs(u, self.templates)
        self.draft_model[inputs] = (generator.model, generator.api_base)
        blocks = []
        for cell, count in case_counts(u):
            cell_key = digest(cell)
            self.drafted[(inputs, cell_key)] = max(self.drafted.get((inputs, cell_key), 0), count)
            blocks.append((("drafted", inputs, cell_key), count, False))
        return blocks


def counted_plan(spec: Spec, universes: list[Universe], count: WorkCount, *, cap: int) -> Plan:
    """``plan``'s answer for a grid of more than ``cap`` work units: counted, the store not read.

    Stored, failed, blocked and to-compute are ``None`` (reading the store
    unit by unit is what the cap avoids); ``cost`` is that of every unit; no
    wall time is given.
    """
    unknown = dict.fromkeys(("stored", "failed", "blocked", "to_compute", "calls_stored", "calls_to_make"))
    stages = {name: StagePlan(units=count.units[stage], **unknown, calls=count.calls[stage], cost=count.cost[stage])
              for stage, name in PLAN_STAGES.items()}
    stages["score"] = StagePlan(units=count.rows, **unknown, calls=0, cost=0.0)
    counted = (f"the grid needs {count.describe()}, more than {cap:,}: they were counted, not listed, and the store was "
               "not read, so stored, failed, blocked and to compute are not known and the cost is that of every unit")
    if spec.batch.roles:  # priced per unit only when listed (multiverse.engine._forecast)
        counted += (f"; the costs are direct prices: the batched roles ({', '.join(spec.batch.roles)}) pay "
                    "litellm's batch price, about half")
    return make_plan(spec.name, [u.id for u in universes], axis_stages(spec), stages, naive_calls=count.naive_calls,
                     counted=counted)
