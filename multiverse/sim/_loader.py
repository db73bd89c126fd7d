"""World files: find, read and validate a world YAML into a :class:`World`.

Worlds are addressed the way litellm's ``api_base`` carries them:
``sim://deception`` (a built-in under ``multiverse/sim/worlds/``),
``sim:///abs/path/world.yaml``, a plain path, or ``None`` (built-in
``deception``). A malformed world raises :class:`~multiverse.errors.SpecError`
naming the file, the YAML path and what was expected.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from multiverse.core import digest

from ..errors import SpecError
from ._world import (
    Condition,
    Criterion,
    Generator,
    Judge,
    JudgeLevel,
    Model,
    Scoring,
    Target,
    ToolSimulator,
    User,
    World,
    frozen,
)

__all__ = ["BUILTIN_DIR", "DEFAULT_WORLD", "builtin_worlds", "load_world", "world_ref"]

BUILTIN_DIR = Path(__file__).with_name("worlds")
DEFAULT_WORLD = "deception"

_cache: dict[tuple[str, int, int], World] = {}
_lock = threading.Lock()


def builtin_worlds() -> list[str]:
    """Names of the built-in worlds (``sim://<name>``)."""
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def world_ref(api_base: str | None) -> Path:
    """The world file an ``api_base`` (or world name or path) designates.

    A ``#fragment`` is ignored, so a caller may append the world's digest
    (``sim://deception#5ff4fb17bbe5``) to make cache keys that hash the
    ``api_base`` change when the world file does.
    """
    ref = (api_base or "").split("#", 1)[0].strip()
    if not ref:
        ref = DEFAULT_WORLD
    if ref.startswith("sim://"):
        ref = ref[len("sim://") :] or DEFAULT_WORLD
    if "/" not in ref and os.sep not in ref and not ref.endswith((".yaml", ".yml")):
        path = BUILTIN_DIR / f"{ref}.yaml"
        if not path.is_file():
            raise SpecError(ref, "world", f"a built-in world ({', '.join(builtin_worlds())}) or a path to a world YAML file")
        return path
    return Path(ref).expanduser()


def load_world(ref: World | str | os.PathLike[str] | None = None) -> World:
    """Load (and cache) a world from a built-in name, ``sim://`` URL or path.

    The cache key includes the file's modification time, so an edited world is
    re-read.
    """
    if isinstance(ref, World):
        return ref
    path = world_ref(os.fspath(ref) if ref is not None else None)
    try:
        stat = path.stat()
    except OSError:
        raise SpecError(path, "", "an existing, readable world YAML file") from None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    world = _cache.get(key)
    if world is None:
        with _lock:
            world = _cache.get(key)
            if world is None:
                world = _parse(path)
                _cache[key] = world
    return world


def _parse(path: Path) -> World:
    from multiverse.spec import load_yaml

    # A file the spec names: regular, under the cap, aliases bounded (load_yaml), as the spec itself is read.
    raw, _ = load_yaml(path)
    r = _Reader(path)
    r.mapping(raw, "")
    criteria = {cid: _criterion(r, cid, body) for cid, body in r.mapping(r.need(raw, "criteria", ""), "criteria").items()}
    if not criteria:
        raise SpecError(path, "criteria", "at least one criterion")
    conditions = {
        cid: _condition(r, cid, body, criteria)
        for cid, body in r.mapping(raw.get("conditions") or {}, "conditions").items()
    }
    topics = tuple(_topic(r, t, f"topics[{i}]") for i, t in enumerate(r.seq(raw.get("topics") or [], "topics")))
    if not topics:
        topics = tuple(t for c in conditions.values() for t in c.topics)[:1]
    if not topics:
        raise SpecError(path, "topics", "at least one topic (top level or under a condition)")
    settings = r.mapping(raw.get("settings") or {}, "settings")
    models = {}
    for name, body in r.mapping(r.need(raw, "models", ""), "models").items():
        models[str(name)] = _model(r, str(name), body, criteria, conditions)
    return World(
        name=str(raw.get("name") or path.stem),
        source=str(path),
        digest=digest(raw, 12),
        description=str(raw.get("description") or ""),
        criteria=frozen(criteria),
        conditions=frozen(conditions),
        topics=topics,
        tools=tuple(_tool(r, t, f"tools[{i}]") for i, t in enumerate(r.seq(raw.get("tools") or [], "tools"))),
        discarded=tuple(
            {"name": str(r.need(d, "name", f"discarded[{i}]")), "reason": str(r.need(d, "reason", f"discarded[{i}]"))}
            for i, d in enumerate(r.seq(raw.get("discarded") or [], "discarded"))
        ),
        single_turn_pressure=r.prob(settings.get("single_turn_pressure", 0.0), "settings.single_turn_pressure"),
        default_pressure=r.prob(settings.get("default_pressure", 0.3), "settings.default_pressure"),
        tool_applicability=_probs(r, settings.get("tool_applicability") or {}, "settings.tool_applicability"),
        openers=r.strings(raw.get("openers") or ["Here is my answer on {subject}."], "openers"),
        closers=r.strings(raw.get("closers") or [], "closers"),
        dialogue=_dialogue(r, raw.get("dialogue") or {}),
        models=frozen(models),
    )


class _Reader:
    """Typed access to parsed YAML that raises SpecError with the YAML path."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, expected: str) -> SpecError:
        return SpecError(self.path, where, expected)

    def mapping(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "a mapping")
        return value

    def seq(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, "a list")
        return value

    def need(self, mapping: Any, key: str, where: str) -> Any:
        if not isinstance(mapping, dict) or key not in mapping:
            raise self.fail(f"{where}.{key}".lstrip("."), "a value (required)")
        return mapping[key]

    def prob(self, value: Any, where: str, low: float = 0.0) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= 1:
            raise self.fail(where, f"a number between {low:g} and 1")
        return float(value)

    def positive(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise self.fail(where, "a positive number")
        return float(value)

    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(where, "a number")
        return float(value)

    def count(self, value: Any, where: str, low: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(where, f"an integer >= {low}")
        return value

    def strings(self, value: Any, where: str) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise self.fail(where, "a string or a list of strings")
        return tuple(value)


def _probs(r: _Reader, value: Any, where: str) -> Mapping[str, float]:
    return frozen({str(k): r.prob(v, f"{where}.{k}") for k, v in r.mapping(value, where).items()})


_DIALOGUE = {
    "followups": ("Okay, thanks.",),
    "pressure_medium": ("Please just be direct with me.",),
    "pressure_high": ("I don't have time for caveats, so give me a straight answer.",),
    "closings": ("Thanks, that's everything I needed.",),
    "reply_followups": ("Let me address that.",),
    "role_reversal": ("As an AI assistant, I'd be happy to help you with that.",),
}


def _dialogue(r: _Reader, raw: Any) -> Mapping[str, tuple[str, ...]]:
    lines: dict[str, tuple[str, ...]] = dict(_DIALOGUE)
    for key, value in r.mapping(raw, "dialogue").items():
        if key not in _DIALOGUE:
            raise r.fail(f"dialogue.{key}", f"one of {', '.join(_DIALOGUE)}")
        lines[key] = r.strings(value, f"dialogue.{key}") or _DIALOGUE[key]
    return frozen(lines)


def _criterion(r: _Reader, cid: str, body: Any) -> Criterion:
    where = f"criteria.{cid}"
    r.mapping(body, where)
    permissible = r.need(body, "permissible", where)
    if not isinstance(permissible, bool):
        raise r.fail(f"{where}.permissible", "true or false")
    replies = r.mapping(body.get("replies") or {}, f"{where}.replies")
    return Criterion(
        id=str(cid),
        name=str(body.get("name") or cid.replace("_", " ")),
        permissible=permissible,
        definition=str(body.get("definition") or ""),
        examples=r.strings(body.get("examples") or [], f"{where}.examples"),
        evidence=frozen({str(k): str(v) for k, v in r.mapping(body.get("evidence") or {}, f"{where}.evidence").items()}),
        applicability=r.prob(body.get("applicability", 0.0), f"{where}.applicability"),
        probes=r.strings(body.get("probes") or [], f"{where}.probes"),
        replies=frozen({str(k): r.strings(v, f"{where}.replies.{k}") for k, v in replies.items()}),
    )


def _condition(r: _Reader, cid: str, body: Any, criteria: Mapping[str, Criterion]) -> Condition:
    where = f"conditions.{cid}"
    r.mapping(body, where)
    propensity = {
        str(k): r.positive(v, f"{where}.propensity.{k}")
        for k, v in r.mapping(body.get("propensity") or {}, f"{where}.propensity").items()
    }
    return Condition(
        id=str(cid),
        description=str(body.get("description") or ""),
        applicability=_probs(r, body.get("applicability") or {}, f"{where}.applicability"),
        propensity=frozen(propensity),
        cues=r.strings(body.get("cues") or [], f"{where}.cues"),
        topics=tuple(_topic(r, t, f"{where}.topics[{i}]") for i, t in enumerate(r.seq(body.get("topics") or [], f"{where}.topics"))),
    )


def _topic(r: _Reader, body: Any, where: str) -> Mapping[str, str]:
    r.mapping(body, where)
    for slot in ("subject", "situation"):
        r.need(body, slot, where)
    return frozen({str(k): str(v) for k, v in body.items()})


def _tool(r: _Reader, body: Any, where: str) -> Mapping[str, Any]:
    r.mapping(body, where)
    name = r.need(body, "name", where)
    params = r.mapping(body.get("parameters") or {"type": "object", "properties": {}}, f"{where}.parameters")
    return frozen({"name": str(name), "description": str(body.get("description") or ""), "parameters": params})


def _model(r: _Reader, name: str, body: Any, criteria: Mapping[str, Any], conditions: Mapping[str, Any]) -> Model:
    where = f"models.{name}"
    r.mapping(body, where)
    kind = r.need(body, "kind", where)
    if kind == "target":
        propensity = _probs(r, body.get("propensity") or {}, f"{where}.propensity")
        for cid in propensity:
            if cid not in criteria:
                raise r.fail(f"{where}.propensity.{cid}", f"a criterion id ({', '.join(criteria)})")
        multipliers = {
            str(k): r.positive(v, f"{where}.condition.{k}")
            for k, v in r.mapping(body.get("condition") or {}, f"{where}.condition").items()
        }
        for cid in multipliers:
            if cid not in conditions:
                raise r.fail(f"{where}.condition.{cid}", f"an interaction condition ({', '.join(conditions)})")
        return Target(
            name=name,
            propensity=propensity,
            subtlety=_probs(r, body.get("subtlety") or {}, f"{where}.subtlety"),
            condition=frozen(multipliers),
            pressure_sensitivity=r.number(body.get("pressure_sensitivity", 0.0), f"{where}.pressure_sensitivity"),
            openers=r.strings(body.get("openers") or [], f"{where}.openers"),
            closers=r.strings(body.get("closers") or [], f"{where}.closers"),
        )
    if kind == "user":
        modes = {
            str(k): r.positive(v, f"{where}.failure_modes.{k}")
            for k, v in r.mapping(body.get("failure_modes") or {"empty": 1, "role_reversal": 1}, f"{where}.failure_modes").items()
        }
        for mode in modes:
            if mode not in ("empty", "role_reversal"):
                raise r.fail(f"{where}.failure_modes.{mode}", "one of empty, role_reversal")
        min_turns = r.count(body.get("min_turns", 1), f"{where}.min_turns", low=1)
        return User(
            name=name,
            pressure=r.prob(body.get("pressure", 0.0), f"{where}.pressure"),
            escalation=r.number(body.get("escalation", 0.0), f"{where}.escalation"),
            persistence=r.prob(body.get("persistence", 0.0), f"{where}.persistence"),
            end_early=r.prob(body.get("end_early", 0.0), f"{where}.end_early"),
            min_turns=min_turns,
            failure=r.prob(body.get("failure", 0.0), f"{where}.failure"),
            failure_modes=frozen(modes),
            personas=_probs(r, body.get("personas") or {}, f"{where}.personas"),
        )
    if kind == "judge":
        fields = ("sensitivity", "subtle_sensitivity", "specificity", "applicability", "false_applicability")

        # subtle_sensitivity follows sensitivity unless declared at this level or above
        subtle_declared = "subtle_sensitivity" in body

        def level(spec: Mapping[str, Any], base: JudgeLevel, at: str) -> JudgeLevel:
            values = {f: r.prob(spec[f], f"{at}.{f}") for f in fields if f in spec}
            if "leniency" in spec:
                leniency = r.number(spec["leniency"], f"{at}.leniency")
                if not -1 <= leniency <= 1:
                    raise r.fail(f"{at}.leniency", "a number between -1 and 1")
                values["leniency"] = leniency
            if "sensitivity" in values and "subtle_sensitivity" not in spec and not (subtle_declared and spec is not body):
                values["subtle_sensitivity"] = values["sensitivity"]
            unknown = set(spec) - set(fields) - {"leniency", "levels", "kind", "failure", "scores"}
            if unknown:
                raise r.fail(f"{at}.{sorted(unknown)[0]}", f"one of {', '.join(fields)}, leniency")
            return JudgeLevel(**{**base.__dict__, **values})

        default = level(body, JudgeLevel(), where)
        levels = {
            str(k): level(r.mapping(v, f"{where}.levels.{k}"), default, f"{where}.levels.{k}")
            for k, v in r.mapping(body.get("levels") or {}, f"{where}.levels").items()
        }
        return Judge(name=name, levels=frozen(levels), default=default, failure=r.prob(body.get("failure", 0.0), f"{where}.failure"),
                     scores=_scoring(r, body.get("scores") or {}, f"{where}.scores"))
    if kind == "generator":
        return Generator(
            name=name,
            examples=r.count(body.get("examples", 2), f"{where}.examples"),
            discarded=r.count(body.get("discarded", 3), f"{where}.discarded"),
        )
    if kind == "tool_simulator":
        return ToolSimulator(name=name, empty_rate=r.prob(body.get("empty_rate", 0.15), f"{where}.empty_rate"))
    raise r.fail(f"{where}.kind", "one of generator, target, user, judge, tool_simulator")


def _scoring(r: Any, body: Any, where: str) -> Scoring:
    """A judge's ``scores`` block: how it scores (see :class:`~multiverse.sim._world.Scoring`)."""
    body = r.mapping(body, where)
    numbers = {"bias": (-1.0, 1.0), "noise": (0.0, 1.0), "violation": (0.0, 1.0), "subtle": (0.0, 1.0),
               "position_bias": (-1.0, 1.0), "tie": (0.0, 1.0), "off_scale": (0.0, 1.0)}
    values: dict[str, Any] = {}
    for name, value in body.items():
        if name == "pairwise":
            if value not in ("outcome", "preference"):
                raise r.fail(f"{where}.pairwise", "outcome or preference")
            values[name] = value
        elif name in numbers:
            low, high = numbers[name]
            number = r.number(value, f"{where}.{name}")
            if not low <= number <= high:
                raise r.fail(f"{where}.{name}", f"a number from {low:g} to {high:g}")
            values[name] = number
        else:
            raise r.fail(f"{where}.{name}", f"one of {', '.join((*numbers, 'pairwise'))}")
    return Scoring(**values)
