"""What a work unit's key reads, digested once per universe: the inputs every unit of a stage shares.

A case's key reads its generator, the rubric's concept and criteria, the
design's tools and the case templates (:func:`case_inputs`); a transcript's,
its system, simulated user, tool simulator, setting and the rollout templates
(:func:`rollout_inputs`); a judgment's, its judge, the rubric and evidence
texts and the judge templates (:func:`judge_inputs`). The templates are the
digests of ``multiverse.work._prompts.template_digests``. Listing the units
(``multiverse.work._units.build_work``) and counting them without a list
(the engine's count of a huge grid) digest the same inputs here, so a
counted unit is the listed one.

An instruction the spec declares (``judge.template``, ``rollout.user.template``,
...) enters the key of the units that read it, and only when it differs from
the built-in text (``multiverse.work._prompts.builtin_texts``), which the
template digests already hold: a spec that writes nothing, or writes the
built-in text out, keeps the keys it always had.

A simulated (``sim/``) model is keyed by its world's content, wherever the
world file lives: keys survive moving the project and change when the world
is edited.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from multiverse.core import ModelConfig, digest, is_simulated, read_regular_file
from multiverse.spec import Spec, resolve_references, to_yaml_dict
from multiverse.work._prompts import builtin_texts

__all__ = ["BUILTIN_WORLD", "case_inputs", "judge_inputs", "model_key", "resolve_config", "rollout_inputs", "rubric_key",
           "world_uri"]

BUILTIN_WORLD = "deception"
#: the worlds that ship with multiverse (the sim room's; read here as files, never imported)
_BUILTIN_WORLDS = Path(__file__).resolve().parents[1] / "sim" / "worlds"


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
    path = Path(target) if target.startswith("/") else _BUILTIN_WORLDS / f"{target}.yaml"
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return "missing"
    return _world_digest_at(str(path), mtime)


def resolve_config(config: ModelConfig, spec: Spec) -> ModelConfig:
    """``config`` with a sim/ model pointed at the spec's world (other models unchanged)."""
    if is_simulated(config.model) and config.api_base is None:
        return replace(config, api_base=world_uri(spec))
    return config


def model_key(config: ModelConfig) -> dict[str, Any]:
    """What a key reads of a model: its name, params and server, or a simulated model's world."""
    out = {"model": config.model, "params": dict(config.params), "api_base": config.api_base}
    if is_simulated(config.model):
        out["api_base"] = None
        out["world"] = _world_digest(config.api_base or f"sim://{BUILTIN_WORLD}")
    return out


def rubric_key(spec: Spec) -> dict[str, Any]:
    """What the test cases depend on: the concept and criteria, not the evidence texts."""
    return {
        "concept": to_yaml_dict(spec.concept),
        "criteria": [{k: v for k, v in to_yaml_dict(c).items() if k != "evidence"} for c in spec.rubric.criteria],
    }


def declared(text: str | None, field: str, scale: str = "binary") -> dict[str, str]:
    """``{field: text}`` when the spec declares an instruction other than the built-in one, else nothing."""
    return {} if text is None or text == builtin_texts(scale)[field] else {field: text}


def case_inputs(u: Spec, templates: Mapping[str, str]) -> tuple[ModelConfig, str]:
    """A universe's case generator, and the digest of what every case it drafts shares."""
    generator = resolve_config(u.design.generator.to_model_config(), u)
    payload = {"generator": model_key(generator), "rubric": rubric_key(u), "tools": u.design.tools,
               "templates": templates["case"]}
    texts = {**declared(u.design.generator.system_prompt, "design.generator.system_prompt"),
             **declared(u.design.generator.template, "design.generator.template")}
    return generator, digest({**payload, **({"instructions": texts} if texts else {})})


def rollout_inputs(u: Spec, system: Any, tools_possible: bool, templates: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """What every transcript of one system in one universe shares: its digest, and the configs and texts it runs with."""
    multi = u.rollout.setting == "multi_turn"
    user = u.rollout.user
    simulator = u.rollout.tool_simulator
    payload = {
        "system": {**model_key(resolve_config(system.to_model_config(), u)), "system_prompt": system.system_prompt,
                   "tools": list(system.tools)},
        "user": {**model_key(resolve_config(user.to_model_config(), u)), "persona": user.persona,
                 "instructions": user.instructions, **declared(user.template, "rollout.user.template"),
                 **declared(user.opening, "rollout.user.opening")}
        if multi else None,
        "setting": u.rollout.setting,
        "max_turns": u.rollout.max_turns if multi else None,
        "seed": u.rollout.seed,
        "tool_simulator": {**model_key(resolve_config(simulator.to_model_config(), u)),
                           "functions": dict(simulator.functions),
                           **declared(simulator.template, "rollout.tool_simulator.template")}
        if tools_possible else None,
        "templates": templates["transcript"],
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
        "user_template": user.template,
        "user_opening": user.opening,
        "tool_template": simulator.template,
    }
    return digest(payload), configs


def judge_inputs(u: Spec, templates: Mapping[str, str]) -> tuple[ModelConfig, str]:
    """A universe's judge, and the digest of what every judgment it makes shares: the judge,
    the rubric text and the evidence texts, and for a scored judge its scale (type, range, anchors)
    and the score templates. A pairwise judgment's reference transcript and position are the
    unit's own (``multiverse.work._units``)."""
    judge = resolve_config(u.judge.to_model_config(), u)
    level = u.judge.evidence_standard
    rubric_text = [
        {"id": c.id, "name": c.name, "definition": c.definition, "permissible": c.permissible} for c in u.rubric.criteria
    ]
    evidence_text = {c.id: c.evidence.get(level, "") for c in u.rubric.criteria}
    inputs = {"judge": model_key(judge), "rubric": rubric_text, "evidence": evidence_text, "level": level,
              "templates": templates["judgment"]}
    scale = u.judge.scale
    if scale.scored:
        # Only a scored judge reads a scale and the score templates: a binary judgment's key stays as it was.
        anchors = {str(point): text for point, text in scale.anchors.items()}
        inputs |= {"scale": {"type": scale.type, "min": scale.min, "max": scale.max, "anchors": anchors},
                   "templates": templates["score"]}
    texts = {**declared(u.judge.system_prompt, "judge.system_prompt", scale.type),
             **declared(u.judge.template, "judge.template", scale.type)}
    if texts:
        inputs["instructions"] = texts
    return judge, digest(inputs)
