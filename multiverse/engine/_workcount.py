"""How many work units a set of universes needs, counted without listing universes x cases.

``build_work`` makes one object per unit and one row per verdict, which at
scale is gigabytes before the first call. These counts come from each
universe's distinct stage configurations instead, with the keys' own rules
(``multiverse.work._units``):

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

from multiverse.core._keys import digest
from multiverse.engine._plan import Plan, StagePlan, make_plan
from multiverse.model._pricing import TOKENS, estimate_cost
from multiverse.spec import Spec, to_yaml_dict
from multiverse.spec._design import case_counts
from multiverse.spec._grid import Universe, axis_stages
from multiverse.work._prompts import template_digests
from multiverse.work._units import _judge_inputs, _model_key, _rollout_inputs, _rubric_key, _Shared, resolve_config

__all__ = ["WorkCount", "calls_per_transcript", "count_work", "counted_plan"]

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
    calls_by_endpoint: dict[tuple[str, str | None], int] = field(default_factory=dict)
    tokens_by_endpoint: dict[tuple[str, str | None], int] = field(default_factory=dict)

    def _add(self, endpoint: tuple[str, str | None], calls: int, tokens: tuple[int, int]) -> None:
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
    shared = _Shared(template_digests())
    drafted: dict[tuple, int] = {}  # (inputs, cell) -> most cases any universe drafts there
    draft_model: dict[str, tuple[str, str | None]] = {}  # inputs -> generator (model, api_base)
    transcripts: dict[tuple, set] = {}  # (block, rollout) -> {(cases, replicates)}
    judged: dict[tuple, set] = {}  # (block, rollout, judge) -> {(cases, replicates, samples)}
    rollout_calls: dict[str, tuple[int, dict, list]] = {}  # rollout -> (calls per transcript, {endpoint: its calls}, models)
    judge_model: dict[str, tuple[str, str | None]] = {}
    upstream = [a for a, st in (stages or {}).items() if st in ("draft", "rollout")]
    unscored = [a for a, st in (stages or {}).items() if st != "score"]
    rollouts: dict[tuple, tuple] = {}  # upstream options -> a universe's rollout profile
    done: dict[tuple, tuple[int, int]] = {}  # options before scoring -> (rows, naive calls) of a universe
    out = WorkCount()
    for universe in universes:
        u = universe.spec
        before_scoring = tuple(universe.options.get(a) for a in unscored) if stages is not None else None
        if before_scoring is not None and before_scoring in done:
            # Its units are another universe's; only its verdict rows are its own.
            out.rows += done[before_scoring][0]
            out.naive_calls += done[before_scoring][1]
            continue
        key = tuple(universe.options.get(a) for a in upstream) if stages is not None else None
        if key is None or key not in rollouts:
            profile = _rollout_profile(u, shared, drafted, draft_model, rollout_calls)
            if key is not None:
                rollouts[key] = profile
        else:
            profile = rollouts[key]
        entries, replicates, per_transcript = profile
        judge, judge_inputs = _judge_inputs(u, shared)
        jd = judge_inputs["judge_inputs"]
        judge_model[jd] = (judge.model, judge.api_base)
        samples = u.judge.samples
        rows = naive = 0
        for block, rd, size in entries:
            transcripts.setdefault((block, rd), set()).add((size, replicates))
            judged.setdefault((block, rd, jd), set()).add((size, replicates, samples))
            rows += size * replicates
            naive += size * replicates * ((block[0] == "drafted") + per_transcript + samples)
        out.rows += rows
        out.naive_calls += naive
        if before_scoring is not None:
            done[before_scoring] = (rows, naive)
    out.units["case"] = sum(drafted.values())
    out.calls["case"] = out.units["case"]
    out.cost["case"] = sum(estimate_cost(draft_model[inputs][0], n, *TOKENS["draft"]) for (inputs, _), n in drafted.items())
    for (inputs, _), n in drafted.items():
        out._add(draft_model[inputs], n, TOKENS["draft"])
    out.units["transcript"], out.calls["transcript"], out.cost["transcript"] = 0, 0, 0.0
    for (_, rd), boxes in transcripts.items():
        n = _union_volume(boxes)
        per, endpoints, models = rollout_calls[rd]
        out.units["transcript"] += n
        out.calls["transcript"] += n * per
        # As forecast does: each model of the rollout is priced for all its calls.
        out.cost["transcript"] += sum(estimate_cost(m, n * per, *TOKENS["rollout"]) for m in models)
        for endpoint, calls in endpoints.items():
            out._add(endpoint, n * calls, TOKENS["rollout"])
    out.units["judgment"], out.cost["judgment"] = 0, 0.0
    for (_, _, jd), boxes in judged.items():
        n = _union_volume(boxes)
        out.units["judgment"] += n
        out.cost["judgment"] += estimate_cost(judge_model[jd][0], n, *TOKENS["judge"])
        out._add(judge_model[jd], n, TOKENS["judge"])
    out.calls["judgment"] = out.units["judgment"]
    return out


def _rollout_profile(u: Any, shared: _Shared, drafted: dict, draft_model: dict, rollout_calls: dict) -> tuple:
    """A universe's transcripts as ([(case block, rollout digest, cases)] per system, replicates, calls per transcript)."""
    blocks = _case_blocks(u, shared, drafted, draft_model)
    per_transcript = calls_per_transcript(u.rollout.setting, u.rollout.max_turns)
    multi = u.rollout.setting == "multi_turn"
    memo: dict[tuple, str] = {}
    entries = []
    for system in u.systems:
        for block, size, tools in blocks:
            possible = bool(system.tools) or bool(u.design.tools) or tools
            if (system.name, possible) not in memo:
                rd, configs = _rollout_inputs(u, system, possible, shared.templates["transcript"])
                memo[(system.name, possible)] = rd
                # A user and a system call per turn; one system call in a single turn.
                system_end = (configs["system"].model, configs["system"].api_base)
                endpoints = {system_end: 1 if not multi else u.rollout.max_turns}
                if multi:
                    user_end = (configs["user"].model, configs["user"].api_base)
                    endpoints[user_end] = endpoints.get(user_end, 0) + u.rollout.max_turns
                models = [configs["system"].model] + ([configs["user"].model] if multi else [])
                rollout_calls[rd] = (per_transcript, endpoints, models)
            entries.append((block, memo[(system.name, possible)], size))
    return entries, u.rollout.replicates, per_transcript


def _case_blocks(u: Any, shared: _Shared, drafted: dict, draft_model: dict) -> list[tuple[tuple, int, bool]]:
    """A universe's cases as (block, cases in it, whether they bring tools): a drafted cell, or one case from a file."""
    if u.cases is not None:
        # A case from a file is its own block; its tools make tool calls possible.
        contents = [to_yaml_dict(c) for c in u.cases]
        memo = ("given", digest(contents))
        if memo not in shared.cases:
            shared.cases[memo] = [(("given", digest({"case": c})), 1, bool(c.get("tools"))) for c in contents]  # type: ignore[misc]
        return shared.cases[memo]  # type: ignore[return-value]
    generator = resolve_config(u.design.generator.to_model_config(), u)
    inputs = digest({"generator": _model_key(generator), "rubric": _rubric_key(u), "tools": u.design.tools,
                     "templates": shared.templates["case"]})
    draft_model[inputs] = (generator.model, generator.api_base)
    blocks = []
    for cell, count in case_counts(u):
        cell_key = digest(cell)
        drafted[(inputs, cell_key)] = max(drafted.get((inputs, cell_key), 0), count)
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
    return make_plan(spec.name, [u.id for u in universes], axis_stages(spec), stages, naive_calls=count.naive_calls,
                     counted=counted)
