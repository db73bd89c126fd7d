"""Work units: what a grid of universes needs computed, each unit named by its key.

The engine (``multiverse.engine._pipeline``) first turns a spec's universes into the set of *unique*
work units, each named by a key that hashes exactly what that unit reads
(``multiverse.core._keys``):

- case key = H(design cell, case index, H(generator config, rubric key, tools, case templates));
  a case from a cases file: H(its content)
- transcript key = H(case key, H(system config, simulated-user config, setting, max turns, seed, rollout
  templates), replicate, and whether a case file's prompt opens the conversation)
- judgment key = H(transcript key, H(judge config, rubric text, evidence-standard text, judge templates))

The templates part is the digest of the prompt templates the stage renders
with (``multiverse.work._prompts.template_digests``): editing a prompt recomputes
what it made, and nothing else, with no version to bump.

The parts of a key that a whole universe shares (generator, system, user,
judge, rubric texts) are digested once and the digest goes into each unit's
key: the same inputs, hashed in two steps, because grids reach tens of
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

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from multiverse.core._bounds import read_regular_file
from multiverse.core._config import ModelConfig
from multiverse.core._keys import digest
from multiverse.spec import Spec, to_yaml_dict
from multiverse.spec._design import case_counts
from multiverse.spec._grid import Universe, expand
from multiverse.spec._toolcode import resolve_references
from multiverse.work._prompts import template_digests

__all__ = ["CaseUnit", "JudgeCall", "Row", "TranscriptUnit", "Work", "build_work", "referenced_keys", "resolve_config", "world_uri"]

BUILTIN_WORLD = "deception"


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
    cases: dict[tuple, list[CaseUnit]] = field(default_factory=dict)
    transcript_keys: dict[tuple, str] = field(default_factory=dict)
    judgments: dict[tuple, tuple[str, tuple[str, ...]]] = field(default_factory=dict)


def world_uri(spec: Spec) -> str:
    """Where sim/ models find their world: ``sim://<builtin>`` or ``sim:///abs/path.yaml``."""
    world = spec.world or BUILTIN_WORLD
    if world.endswith((".yaml", ".yml")):
        return "sim://" + str((spec.base_dir / world).resolve())
    return f"sim://{world}"


@functools.lru_cache(maxsize=64)
def _world_digest_at(path: str, mtime_ns: int) -> str:
    try:
        # A world file the spec names: a regular file under the spec files' cap, never a device or a FIFO.
        data = read_regular_file(Path(path), lambda expected: OSError(expected))
        return digest(data.decode("utf-8", "replace"))
    except OSError:
        return "missing"


def _world_digest(uri: str) -> str:
    """A digest of the world file's content (cached per file version: keys are built per row)."""
    target = uri.removeprefix("sim://")
    path = Path(target) if target.startswith("/") else Path(__file__).parent / "sim" / "worlds" / f"{target}.yaml"
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return "missing"
    return _world_digest_at(str(path), mtime)


def resolve_config(config: ModelConfig, spec: Spec) -> ModelConfig:
    """``config`` with a sim/ model pointed at the spec's world (other models unchanged)."""
    if config.model.startswith("sim/") and config.api_base is None:
        return replace(config, api_base=world_uri(spec))
    return config


def _model_key(config: ModelConfig) -> dict:
    out = {"model": config.model, "params": dict(config.params), "api_base": config.api_base}
    if config.model.startswith("sim/"):
        # A simulated model is its world's content, wherever the file lives:
        # keys survive moving the project, and change when the world is edited.
        out["api_base"] = None
        out["world"] = _world_digest(config.api_base or f"sim://{BUILTIN_WORLD}")
    return out


def _rubric_key(spec: Spec) -> dict:
    """What the test cases depend on: the concept and criteria, not the evidence texts."""
    return {
        "concept": to_yaml_dict(spec.concept),
        "criteria": [{k: v for k, v in to_yaml_dict(c).items() if k != "evidence"} for c in spec.rubric.criteria],
    }


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
        judge_inputs = _judge_inputs(u, shared)
        rollout_memo: dict = {}
        for system in u.systems:
            for case in cases:
                for replicate in range(u.rollout.replicates):
                    tkey = _transcript(u, system, case, replicate, work, rollout_memo, shared)
                    jkey, calls = _judgment(u, tkey, work, judge_inputs, shared)
                    work.rows.append(Row(universe, system.name, case.key, case.case_id, case.cell, replicate, tkey, jkey, calls))
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
    generator = resolve_config(u.design.generator.to_model_config(), u)
    inputs = digest({"generator": _model_key(generator), "rubric": _rubric_key(u), "tools": u.design.tools,
                     "templates": shared.templates["case"]})
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


def _rollout_inputs(u: Spec, system, tools_possible: bool, templates: str) -> tuple[str, dict]:
    """What every transcript of one system in one universe shares, digested once."""
    multi = u.rollout.setting == "multi_turn"
    user = u.rollout.user
    simulator = u.rollout.tool_simulator
    payload = {
        "system": {**_model_key(resolve_config(system.to_model_config(), u)), "system_prompt": system.system_prompt, "tools": list(system.tools)},
        "user": {**_model_key(resolve_config(user.to_model_config(), u)), "persona": user.persona, "instructions": user.instructions} if multi else None,
        "setting": u.rollout.setting,
        "max_turns": u.rollout.max_turns if multi else None,
        "seed": u.rollout.seed,
        "tool_simulator": {**_model_key(resolve_config(simulator.to_model_config(), u)), "functions": dict(simulator.functions)} if tools_possible else None,
        "templates": templates,
    }
    configs = {
        "system": resolve_config(system.to_model_config(), u),
        "system_prompt": system.system_prompt,
        "tools": tuple(system.tools),
        "user": resolve_config(user.to_model_config(), u) if multi else None,
        "persona": user.persona,
        "instructions": user.instructions,
        "tool_simulator": resolve_config(simulator.to_model_config(), u) if tools_possible else None,
        "tool_functions": resolve_references(simulator.functions, u.base_dir),
    }
    return digest(payload), configs


def _transcript(u: Spec, system, case: CaseUnit, replicate: int, work: Work, memo: dict, shared: _Shared) -> str:
    tools_possible = bool(system.tools) or u.design.tools or bool(case.given and case.given.get("tools"))
    if (system.name, tools_possible) not in memo:
        memo[(system.name, tools_possible)] = _rollout_inputs(u, system, tools_possible, shared.templates["transcript"])
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


def _judge_inputs(u: Spec, shared: _Shared) -> tuple[ModelConfig, dict]:
    """What every judgment of a universe shares: the judge, the rubric text and the evidence texts."""
    judge = resolve_config(u.judge.to_model_config(), u)
    level = u.judge.evidence_standard
    rubric_text = [
        {"id": c.id, "name": c.name, "definition": c.definition, "permissible": c.permissible} for c in u.rubric.criteria
    ]
    evidence_text = {c.id: c.evidence.get(level, "") for c in u.rubric.criteria}
    return judge, {"judge_inputs": digest({"judge": _model_key(judge), "rubric": rubric_text, "evidence": evidence_text,
                                           "level": level, "templates": shared.templates["judgment"]})}


def _judgment(u: Spec, transcript_key: str, work: Work, inputs: tuple[ModelConfig, dict],
              shared: _Shared) -> tuple[str, tuple[str, ...]]:
    judge, judge_inputs = inputs
    memo = (transcript_key, judge_inputs["judge_inputs"], u.judge.samples)
    if memo in shared.judgments:
        return shared.judgments[memo]
    level = u.judge.evidence_standard
    common = {"transcript": transcript_key, **judge_inputs}
    judgment_key = digest({**common, "samples": u.judge.samples})
    calls = []
    for sample in range(u.judge.samples):
        key = digest({**common, "sample": sample})
        if key not in work.judge_calls:
            work.judge_calls[key] = JudgeCall(key, transcript_key, sample, judge, level, _seed(key), u)
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
