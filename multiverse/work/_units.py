"""Work units: what a grid of universes needs computed, each unit named by its key.

The engine (``multiverse.engine._pipeline``) first turns a spec's universes into the set of *unique*
work units, each named by a key that hashes exactly what that unit reads
(``multiverse.core._keys``):

- case key = H(design cell, case index, H(generator config, rubric key, tools, case templates));
  a case from a cases file: H(its content)
- transcript key = H(case key, H(system config, simulated-user config, setting, max turns, seed, rollout
  templates), replicate, and whether a case file's prompt opens the conversation)
- judgment key = H(transcript key, H(judge config, rubric text, evidence-standard text, judge templates))
  (a scored judge: its scale and the score templates too; a pairwise judge: also the reference
  system's transcript of the same case and replicate, and the order the two are shown in)

The templates part is the digest of the prompt templates the stage renders
with (``multiverse.work._prompts.template_digests``): editing a prompt recomputes
what it made, and nothing else, with no version to bump.

The parts of a key that a whole universe shares (generator, system, user,
judge, rubric texts) are digested once (``multiverse.work._inputs``) and the
digest goes into each unit's key: the same inputs, hashed in two steps, because grids reach tens of
thousands of rows. Universes that share those parts share the digests, the
unit lists and the keys, which are worked out once.

Universes that differ only in judge fields share every transcript; universes
that differ only in scoring share every judgment; anything already in the
store is never computed again. Verdicts and rates are recomputed from stored
judgments on every run: they are pure functions, not model calls.

Transport failures (after the client's retries) are counted and recorded in
the tables as ``rollout_failed``/``judge_failed`` but not stored, so a later
run retries them. Content failures (a simulated user that keeps breaking
role, a judge answer that cannot be parsed) are results: they are stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from multiverse.core import ModelConfig, digest
from multiverse.spec import Spec, System, Universe, case_counts, expand, to_yaml_dict
from multiverse.work._inputs import case_inputs, judge_inputs, resolve_config, rollout_inputs, world_uri
from multiverse.work._prompts import template_digests

__all__ = ["REFERENCE_EXCLUDED", "CaseUnit", "JudgeCall", "Row", "TranscriptUnit", "Work", "build_work", "positions",
           "referenced_keys", "resolve_config", "world_uri"]

#: Why a pairwise run's reference system has no judgment: it would be compared with itself.
REFERENCE_EXCLUDED = "the reference system of a pairwise scale: not compared with itself"


def positions(order: str) -> tuple[str, ...]:
    """The positions a pairwise judge sees a system in: first (``ab``), second (``ba``), or both."""
    return ("ab", "ba") if order == "both" else (order,)


# -- work units -------------------------------------------------------------


@dataclass(frozen=True)
class CaseUnit:
    key: str
    case_id: str
    cell: Mapping[str, str]
    index: int
    generator: ModelConfig | None
    given: Mapping[str, Any] | None  # a case from a cases file: no generation call
    seed: int
    spec: Spec = field(repr=False, compare=False)

    @property
    def models(self) -> tuple[ModelConfig, ...]:
        """The models this unit calls (an executor paces units by them)."""
        return (self.generator,) if self.generator is not None and self.given is None else ()


@dataclass(frozen=True)
class TranscriptUnit:
    key: str
    case_key: str
    system: str
    replicate: int
    setting: str
    max_turns: int
    configs: Mapping[str, Any] = field(compare=False)  # system/user/tool ModelConfigs and texts
    seed: int = 0
    opens_with_prompt: bool = False  # multi-turn: the case's written prompt is the first user turn

    @property
    def models(self) -> tuple[ModelConfig, ...]:
        """The models this unit calls: the system, the simulated user, the tool simulator."""
        return tuple(c for c in (self.configs.get(k) for k in ("system", "user", "tool_simulator")) if c is not None)


@dataclass(frozen=True)
class JudgeCall:
    key: str
    transcript_key: str
    sample: int
    config: ModelConfig
    evidence_standard: str
    seed: int
    spec: Spec = field(repr=False, compare=False)
    #: pairwise: the reference system's transcript, and whether the system's is shown first (ab) or second (ba)
    reference_key: str | None = None
    position: str = "ab"

    @property
    def models(self) -> tuple[ModelConfig, ...]:
        return (self.config,)


@dataclass(frozen=True)
class Row:
    universe: Universe
    system: str
    case_key: str
    case_id: str
    cell: Mapping[str, str]
    replicate: int
    transcript_key: str
    judgment_key: str
    judge_calls: tuple[str, ...]
    #: pairwise: the reference system's transcript this row's is compared with
    reference_key: str | None = None
    #: why the row has no judgment although its transcript may be fine (the reference system's own rows)
    excluded: str = ""


@dataclass
class Work:
    """Every unique unit a set of universes needs, and how universes map onto them."""

    universes: list[Universe]
    cases: dict[str, CaseUnit] = field(default_factory=dict)
    transcripts: dict[str, TranscriptUnit] = field(default_factory=dict)
    judge_calls: dict[str, JudgeCall] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)


@dataclass
class _Shared:
    """What universes share while their units are derived: template digests and memoised keys."""

    templates: dict[str, str]
    cases: dict[tuple[Any, ...], list[CaseUnit]] = field(default_factory=dict)
    transcript_keys: dict[tuple[Any, ...], str] = field(default_factory=dict)
    judgments: dict[tuple[Any, ...], tuple[str, tuple[str, ...]]] = field(default_factory=dict)


def _seed(*parts: Any) -> int:
    return int(digest(list(parts), 8), 16) % (2**31)


def build_work(spec: Spec, universes: list[Universe] | None = None) -> Work:
    """Derive the unique cases, transcripts and judge calls of ``universes``."""
    universes = expand(spec) if universes is None else universes
    work = Work(universes)
    shared = _Shared(template_digests())
    for universe in universes:
        u = universe.spec
        cases = _cases_of(u, work, shared)
        judge = judge_inputs(u, shared.templates)
        rollout_memo: dict[Any, Any] = {}
        for system in u.systems:
            for case in cases:
                for replicate in range(u.rollout.replicates):
                    tkey = _transcript(u, system, case, replicate, work, rollout_memo, shared)
                    reference, excluded = _reference(u, system.name, case, replicate, work, rollout_memo, shared)
                    calls: tuple[str, ...] = ()
                    if excluded:
                        jkey = digest({"transcript": tkey, "judge_inputs": judge[1], "excluded": "reference"})
                    else:
                        jkey, calls = _judgment(u, tkey, work, judge, shared, reference)
                    work.rows.append(Row(universe, system.name, case.key, case.case_id, case.cell, replicate, tkey, jkey,
                                         calls, reference, excluded))
    return work


def _cases_of(u: Spec, work: Work, shared: _Shared) -> list[CaseUnit]:
    if u.cases is not None:
        # A case from a file is its content: no template made it.
        contents = [(case, to_yaml_dict(case)) for case in u.cases]
        memo = ("given", digest([content for _, content in contents]))
        if memo not in shared.cases:
            out = []
            for case, content in contents:
                key = digest({"case": content})
                out.append(work.cases.setdefault(key, CaseUnit(key, case.id, dict(case.cell), 0, None, content, 0, u)))
            shared.cases[memo] = out
        return shared.cases[memo]
    generator, inputs = case_inputs(u, shared.templates)
    counts = case_counts(u)
    drafted = ("drafted", inputs, digest(counts))
    if drafted not in shared.cases:
        out = []
        for cell, count in counts:
            for index in range(count):
                key = digest({"cell": cell, "index": index, "inputs": inputs})
                case_id = ".".join([*cell.values(), f"{index + 1:02d}"])
                out.append(work.cases.setdefault(key, CaseUnit(key, case_id, cell, index, generator, None, _seed(key), u)))
        shared.cases[drafted] = out
    return shared.cases[drafted]


def _transcript(u: Spec, system: System, case: CaseUnit, replicate: int, work: Work, memo: dict[Any, Any], shared: _Shared) -> str:
    tools_possible = bool(system.tools) or u.design.tools or bool(case.given and case.given.get("tools"))
    if (system.name, tools_possible) not in memo:
        memo[(system.name, tools_possible)] = rollout_inputs(u, system, tools_possible, shared.templates)
    inputs, configs = memo[(system.name, tools_possible)]
    # A case file's prompt is the exact first message a person wrote: a
    # multi-turn rollout opens with it (generated cases' prompts are their
    # single-turn form, so the simulated user opens those from the brief).
    opens = u.rollout.setting == "multi_turn" and bool(case.given and case.given.get("prompt"))
    parts = (case.key, inputs, replicate, opens)
    key = shared.transcript_keys.get(parts)
    if key is None:
        key = digest({"case": case.key, "rollout": inputs, "replicate": replicate,
                      **({"opening": "case prompt"} if opens else {})})
        shared.transcript_keys[parts] = key
    if key not in work.transcripts:
        work.transcripts[key] = TranscriptUnit(
            key, case.key, system.name, replicate, u.rollout.setting, u.rollout.max_turns, configs,
            seed=_seed(u.rollout.seed, replicate, case.key), opens_with_prompt=opens,
        )
    return key


def _reference(u: Spec, system: str, case: CaseUnit, replicate: int, work: Work, memo: dict[Any, Any],
               shared: _Shared) -> tuple[str | None, str]:
    """A pairwise judge's reference transcript for this case and replicate (None otherwise), or why there is none."""
    scale = u.judge.scale
    if scale.type != "pairwise":
        return None, ""
    if system == scale.reference and not scale.compare_reference:
        return None, REFERENCE_EXCLUDED
    reference = next(s for s in u.systems if s.name == scale.reference)
    return _transcript(u, reference, case, replicate, work, memo, shared), ""


def _judgment(u: Spec, transcript_key: str, work: Work, judge: tuple[ModelConfig, str],
              shared: _Shared, reference: str | None = None) -> tuple[str, tuple[str, ...]]:
    config, inputs = judge
    pair = reference is not None
    memo = (transcript_key, inputs, u.judge.samples, *((reference, u.judge.order) if pair else ()))
    if memo in shared.judgments:
        return shared.judgments[memo]
    level = u.judge.evidence_standard
    common = {"transcript": transcript_key, "judge_inputs": inputs}
    # A binary or a single-transcript judgment keys exactly as before; a pair adds what it compares with, and how shown.
    judgment_key = digest({**common, "samples": u.judge.samples,
                           **({"reference": reference, "order": u.judge.order} if pair else {})})
    calls = []
    for sample in range(u.judge.samples):
        for position in positions(u.judge.order) if pair else ("ab",):
            key = digest({**common, "sample": sample, **({"reference": reference, "position": position} if pair else {})})
            if key not in work.judge_calls:
                work.judge_calls[key] = JudgeCall(key, transcript_key, sample, config, level, _seed(key), u,
                                                  reference, position)
            calls.append(key)
    shared.judgments[memo] = (judgment_key, tuple(calls))
    return shared.judgments[memo]


def referenced_keys(spec: Spec) -> dict[str, set[str]]:
    """Every store key a spec's grid uses, per store stage (what ``store gc`` keeps)."""
    work = build_work(spec)
    return {
        "case": {k for k, c in work.cases.items() if c.given is None},
        "transcript": set(work.transcripts),
        "judgment": set(work.judge_calls),
    }
