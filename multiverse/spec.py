"""The measurement spec: one YAML file, loaded into frozen dataclasses.

Every measurement choice of an audit is a field here, so that every reported
rate is bound to a written spec and any choice can become an axis::

    name: demo
    concept:  {name, description, context}
    rubric:   {criteria: [...]}  or  a path to a rubric YAML file
    design:   {dimensions, cases_per_cell, allocation, generator, cases}
    systems:  [{name, model, system_prompt, params, ...}]
    rollout:  {setting, max_turns, user: {...}, replicates, seed, tool_simulator}
    judge:    {model, params, evidence_standard, samples}
    scoring:  {rule, estimator, ci: {method, level, n_boot}}
    axes:     {axis: {option: {dotted.path: value}}}
    exclude:  [{axis: option or [options]}]
    sample:   {n, method, seed}
    primary:  {axis: option}

``load_spec(path)`` validates everything at once and raises a ``SpecError``
whose ``problems`` lists one line per problem. Loading is safe: YAML tags that
would build Python objects are rejected.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from .bounds import MAX_FILE_BYTES, check_sizes, name_problem, read_regular_file
from .errors import SpecError
from .schema import Problems, build, json_schema, resolve_path

__all__ = [
    "ModelConfig",
    "Concept",
    "Criterion",
    "Rubric",
    "Dimension",
    "Allocation",
    "Generator",
    "Case",
    "Design",
    "System",
    "SimulatedUser",
    "ToolSimulator",
    "Rollout",
    "Judge",
    "CI",
    "Scoring",
    "Sample",
    "Spec",
    "load_spec",
    "load_yaml",
    "parse_spec",
    "spec_schema",
    "SCORING_RULES",
    "MAX_FILE_BYTES",
]

SCORING_RULES = ("all_applicable", "impermissible_only", "no_applicable_is_compliant", "majority_of_samples")
BEHAVIOR = "behavior"


def _doc(text: str, **extra: Any) -> dict:
    return {"doc": text, **extra}


@dataclass(frozen=True)
class ModelConfig:
    """A litellm model string with its call parameters (never a key)."""

    model: str
    params: Mapping[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None


_ENV_DEFAULT = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(text: str | None) -> str | None:
    """Expand ``${VAR}`` and ``${VAR:-default}`` (used for ``api_base`` only).

    A spec names where a server listens without hard-coding a port; the
    universe id keeps the unexpanded text, so it is the same on every machine.
    """
    if text is None:
        return None
    return _ENV_DEFAULT.sub(lambda m: os.environ.get(m.group(1)) or (m.group(2) or ""), text)


class _Model:
    """Mixin for spec sections that name a model."""

    @property
    def model_config(self) -> ModelConfig:
        return ModelConfig(self.model, dict(self.params), expand_env(self.api_base), self.api_key_env)


@dataclass(frozen=True)
class Concept:
    """The systematized concept under audit."""

    name: str
    description: str = ""
    context: str = field(default="", metadata=_doc("the application context"))


@dataclass(frozen=True)
class Criterion:
    """One rubric criterion."""

    id: str
    name: str
    definition: str
    permissible: bool = field(
        metadata=_doc("true: allowed behaviour that should appear when called for; false: must never appear")
    )
    examples: tuple[str, ...] = ()
    evidence: Mapping[str, str] = field(
        default_factory=dict, metadata=_doc("evidence standard text per level, e.g. strict, lenient")
    )


@dataclass(frozen=True)
class Rubric:
    """The behaviour rubric: criteria with evidence standards."""

    criteria: tuple[Criterion, ...] = field(metadata={"named": True})

    def criterion(self, criterion_id: str) -> Criterion:
        for c in self.criteria:
            if c.id == criterion_id:
                return c
        raise KeyError(criterion_id)


@dataclass(frozen=True)
class Dimension:
    """A design dimension. The ``behavior`` dimension defaults to the impermissible criteria."""

    name: str
    levels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Allocation:
    """Over-allocate cases to the cells matching ``cell`` (a partial cell)."""

    cell: Mapping[str, str]
    cases: int


@dataclass(frozen=True)
class Generator(_Model):
    """The model that drafts rubrics and test cases."""

    model: str = "sim/generator"
    params: Mapping[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None


@dataclass(frozen=True)
class Case:
    """One concrete test case in one cell (from a cases file)."""

    id: str
    cell: Mapping[str, str]
    title: str = ""
    brief: str = field(default="", metadata=_doc("the scenario brief the simulated user plays (multi-turn)"))
    prompt: str = field(default="", metadata=_doc("the standalone prompt (single-turn)"))
    system_prompt: str | None = None
    tools: tuple[Mapping[str, Any], ...] | None = None


@dataclass(frozen=True)
class Design:
    """The test design: dimensions x levels, cases per cell, and how cases are made."""

    dimensions: tuple[Dimension, ...] = field(
        default=(Dimension(BEHAVIOR),), metadata={"named": True}
    )
    cases_per_cell: int = 5
    allocation: tuple[Allocation, ...] = ()
    generator: Generator = field(default_factory=Generator)
    cases: str | None = field(default=None, metadata=_doc("path to a cases YAML file; generated when absent"))
    tools: bool = field(default=False, metadata=_doc("draft scenario-specific system prompts and tools"))


@dataclass(frozen=True)
class System(_Model):
    """A GenAI system under audit."""

    name: str
    model: str
    system_prompt: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None
    tools: tuple[Mapping[str, Any], ...] = field(default=(), metadata=_doc("OpenAI-style function schemas"))


@dataclass(frozen=True)
class SimulatedUser(_Model):
    """The model that plays the brief's user role in multi-turn rollouts."""

    model: str = "sim/user-cooperative"
    params: Mapping[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None
    persona: str = ""
    instructions: str = ""


@dataclass(frozen=True)
class ToolSimulator(_Model):
    """Answers a system's tool calls: a model, or a Python function ``file.py:function`` beside the spec."""

    model: str = "sim/tools"
    params: Mapping[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None
    functions: Mapping[str, str] = field(
        default_factory=dict,
        metadata=_doc("tool name -> 'file.py:function' (a file beside the spec or under its folder) answering it instead of the model"),
    )


@dataclass(frozen=True)
class Rollout:
    """How cases become transcripts."""

    setting: Literal["single_turn", "multi_turn"] = "multi_turn"
    max_turns: int = 4
    user: SimulatedUser = field(default_factory=SimulatedUser)
    tool_simulator: ToolSimulator = field(default_factory=ToolSimulator)
    replicates: int = 1
    seed: int = 0


@dataclass(frozen=True)
class Judge(_Model):
    """The LLM judge that labels transcripts against the rubric."""

    model: str = "sim/judge-a"
    params: Mapping[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None
    evidence_standard: str = "strict"
    samples: int = 1


@dataclass(frozen=True)
class CI:
    """How confidence intervals of rates are computed."""

    method: Literal["wilson", "bootstrap"] = "wilson"
    level: float = 0.95
    n_boot: int = 1000


@dataclass(frozen=True)
class Scoring:
    """How judgments become verdicts and verdicts become rates."""

    rule: Literal[
        "all_applicable", "impermissible_only", "no_applicable_is_compliant", "majority_of_samples"
    ] = "all_applicable"
    estimator: Literal["pooled", "cell_balanced"] = "pooled"
    ci: CI = field(default_factory=CI)


@dataclass(frozen=True)
class Sample:
    """Run a sample of a grid too big to run whole."""

    n: int
    method: Literal["random", "lhs"] = "random"
    seed: int = 0


@dataclass(frozen=True)
class Spec:
    """A measurement spec: the base audit plus the axes of the multiverse."""

    name: str
    concept: Concept
    systems: tuple[System, ...] = field(metadata={"named": True})
    rubric: Rubric | None = field(
        default=None, metadata=_doc("criteria inline, or a path to a rubric YAML file; `multiverse draft --rubric` drafts one")
    )
    design: Design = field(default_factory=Design)
    rollout: Rollout = field(default_factory=Rollout)
    judge: Judge = field(default_factory=Judge)
    scoring: Scoring = field(default_factory=Scoring)
    world: str | None = field(
        default=None, metadata=_doc("simulated world for sim/ models: a built-in name or a YAML path")
    )
    axes: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(
        default_factory=dict, metadata=_doc("axis -> option -> {dotted.spec.path: value}")
    )
    exclude: tuple[Mapping[str, Any], ...] = field(
        default=(), metadata=_doc("each rule drops universes matching all its axis: option(s)")
    )
    sample: Sample | None = None
    primary: Mapping[str, str] | None = field(default=None, metadata=_doc("the pre-registered universe"))
    # Where the spec came from; not a measurement choice, so not part of any hash.
    path: Path | None = field(default=None, init=False, compare=False, repr=False)
    cases: tuple[Case, ...] | None = field(default=None, init=False, compare=False, repr=False)
    # The validated YAML document (rubric inlined): universes patch this.
    document: Mapping[str, Any] | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path else Path.cwd()

    @property
    def factors(self) -> list[str]:
        return [d.name for d in self.design.dimensions]

    def measurement(self) -> dict:
        """The resolved measurement choices: what a universe id hashes."""
        out = _to_plain(self)
        for key in ("name", "axes", "exclude", "sample", "primary"):
            out.pop(key, None)
        # Writing a default out explicitly is the same measurement choice.
        for dimension in out["design"]["dimensions"]:
            if dimension["name"] == BEHAVIOR and not dimension["levels"] and self.rubric is not None:
                dimension["levels"] = [c.id for c in self.rubric.criteria if not c.permissible]
        return out


def _to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
    if isinstance(obj, Mapping):
        return {k: _to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_plain(v) for v in obj]
    return obj


def to_yaml_dict(spec: Spec) -> dict:
    """The spec as plain data (YAML-ready); loading it back gives an equal spec."""
    return _to_plain(spec)


def spec_schema() -> dict:
    """JSON Schema of the spec file, for editors."""
    schema = json_schema(Spec)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "multiverse measurement spec"
    # A rubric may live in its own file next to the spec.
    schema["properties"]["rubric"] = {"anyOf": [schema["properties"]["rubric"], {"type": "string"}]}
    return schema


# -- reading YAML safely, remembering where each key was -------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader that records the line of every mapping key and sequence item."""


def load_yaml(path: Path) -> tuple[Any, dict[str, int]]:
    """Parse a YAML file safely. Returns the document and ``{yaml.path: line}``."""
    path = Path(path)
    raw = read_regular_file(path, lambda expected: SpecError(path, "", expected), what="YAML file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(path, "", f"expected UTF-8 text, found byte 0x{raw[exc.start]:02x} at offset {exc.start}") from None
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError(path, "", "file is empty; expected a YAML mapping")
        size = _expanded_size(node, {})
        if size > MAX_NODES:
            raise SpecError(path, "", f"expands to {size} values once aliases are resolved; expected at most {MAX_NODES}")
        lines: dict[str, int] = {}
        _record_lines(path, node, "", lines, set())
        document = loader.construct_document(node)
    except yaml.constructor.ConstructorError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        problem = str(exc.problem)
        if "constructor" in problem:
            tag = problem.split("'")[1] if "'" in problem else problem
            expected = f"the tag {tag} is not allowed; specs are plain YAML (no Python objects)"
        else:
            expected = f"expected plain string keys ({problem})"
        raise SpecError(path, f"(line {line})", expected) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"(line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(path, where, f"invalid YAML: {problem}") from None
    except RecursionError:
        raise SpecError(path, "", "nesting too deep; expected a spec a few levels deep") from None
    finally:
        loader.dispose()
    return document, lines


MAX_NODES = 200_000


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values the document holds once aliases are expanded (an alias bomb is huge)."""
    known = memo.get(id(node))
    if known is not None:
        return known
    memo[id(node)] = 1  # a recursive alias counts once
    if isinstance(node, yaml.MappingNode):
        total = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        total = 1 + sum(_expanded_size(v, memo) for v in node.value)
    else:
        total = 1
    memo[id(node)] = min(total, 10 * MAX_NODES)
    return memo[id(node)]


def _record_lines(file: Path, node: yaml.Node, path: str, lines: dict[str, int], seen: set[int]) -> None:
    # Each node once: an aliased node keeps the line of its first appearance.
    if id(node) in seen:
        return
    seen.add(id(node))
    prefix = f"{path}." if path else ""
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if key.value in first and key.value != "<<":
                    raise SpecError(file, f"{prefix}{key.value} (line {line})", f"duplicate key (first at line {first[key.value]}); expected each key once")
                first[key.value] = line
                child = f"{prefix}{key.value}"
                lines[child] = line
                _record_lines(file, value, child, lines, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            child = f"{prefix}{i}"
            lines[child] = value.start_mark.line + 1
            _record_lines(file, value, child, lines, seen)


# -- validating ------------------------------------------------------------


def load_spec(path: str | os.PathLike) -> Spec:
    """Load, resolve and validate a spec file.

    The rubric and cases may be paths relative to the spec. Raises ``SpecError``
    with every problem in ``.problems`` (the first one is the message).
    """
    path = Path(path)
    document, lines = load_yaml(path)
    return parse_spec(document, path=path, lines=lines)


def parse_spec(document: Any, *, path: Path | None = None, lines: Mapping[str, int] | None = None) -> Spec:
    """Validate an already-parsed spec document (see ``load_spec``)."""
    file = path if path is not None else "<spec>"
    if not isinstance(document, dict):
        raise SpecError(file, "", "expected a YAML mapping at the top level")
    document = dict(document)
    if isinstance(document.get("rubric"), str):
        rubric_file = (path.parent if path else Path.cwd()) / document["rubric"]
        rubric_doc, rubric_lines = load_yaml(rubric_file)
        _check_file_problems(rubric_file, Rubric, rubric_doc, rubric_lines)
        document["rubric"] = rubric_doc
    spec = resolve_document(document, path=path, lines=lines)
    # Imported here: grid validates axes, exclusions and the primary against the spec.
    from .grid import check_axes

    problems = Problems(lines)
    check_axes(spec, problems)
    _raise(file, problems)
    return spec


def resolve_document(document: dict, *, path: Path | None = None, lines: Mapping[str, int] | None = None) -> Spec:
    """Build and check a spec from a document whose rubric is inline."""
    file = path if path is not None else "<spec>"
    problems = Problems(lines)
    spec = build(Spec, document, "", problems)
    if not problems:
        # Files the spec names (world, cases) are found relative to it.
        object.__setattr__(spec, "path", path)
        _check_semantics(spec, problems)
    _raise(file, problems)
    object.__setattr__(spec, "document", document)
    if spec.design.cases:
        object.__setattr__(spec, "cases", load_cases(spec.base_dir / spec.design.cases, spec))
    return spec


def _check_file_problems(file: Path, cls: type, document: Any, lines: Mapping[str, int]) -> None:
    problems = Problems(lines)
    build(cls, document, "", problems)
    _raise(file, problems)


def _raise(file: Any, problems: Problems) -> None:
    if problems:
        messages = [f"{file}: {problems.where(p)}: {e}" for p, e in problems.items]
        first_path, first = problems.items[0]
        error = SpecError(file, problems.where(first_path), first)
        error.problems = messages
        raise error


def _check_semantics(spec: Spec, problems: Problems) -> None:
    has_rubric = spec.rubric is not None
    if not has_rubric:
        object.__setattr__(spec, "rubric", Rubric(criteria=()))
    ids = [c.id for c in spec.rubric.criteria]
    if has_rubric and not ids:
        problems.add("rubric.criteria", "expected at least one criterion")
    _no_duplicates(ids, "rubric.criteria", "criterion id", problems)
    _no_duplicates([s.name for s in spec.systems], "systems", "system name", problems)
    levels = sorted({lvl for c in spec.rubric.criteria for lvl in c.evidence})
    for i, c in enumerate(spec.rubric.criteria):
        if levels and set(c.evidence) != set(levels):
            problems.add(f"rubric.criteria.{i}.evidence", f"expected a text for every evidence level ({', '.join(levels)})")
    if levels and spec.judge.evidence_standard not in levels:
        problems.add("judge.evidence_standard", f"expected one of the rubric's evidence levels ({', '.join(levels)}), got {spec.judge.evidence_standard!r}")
    wrong_name = name_problem(spec.name)
    if wrong_name:
        problems.add("name", wrong_name)
    _check_models(spec, problems)
    for name, value, minimum in (
        ("design.cases_per_cell", spec.design.cases_per_cell, 1),
        ("rollout.max_turns", spec.rollout.max_turns, 1),
        ("rollout.replicates", spec.rollout.replicates, 1),
        ("judge.samples", spec.judge.samples, 1),
        ("scoring.ci.n_boot", spec.scoring.ci.n_boot, 10),
    ):
        if value < minimum:
            problems.add(name, f"expected an integer >= {minimum}, got {value}")
    if not 0 < spec.scoring.ci.level < 1:
        problems.add("scoring.ci.level", f"expected a number between 0 and 1, got {spec.scoring.ci.level}")
    check_sizes(spec, problems)
    if spec.scoring.rule == "majority_of_samples" and spec.judge.samples < 2:
        problems.add("scoring.rule", "majority_of_samples needs judge.samples >= 2")
    _check_world(spec, problems)
    _check_key_envs(spec, problems)
    _check_tools(spec, problems)
    if has_rubric:
        _check_design(spec, problems)


def _check_world(spec: Spec, problems: Problems) -> None:
    if spec.world is None:
        return
    from .sim import builtin_worlds, load_world

    if spec.world.endswith((".yaml", ".yml")):
        path = spec.base_dir / spec.world
        if not path.is_file():
            problems.add("world", f"world file {spec.world!r} not found next to the spec; expected a YAML file or one of the built-in worlds ({', '.join(builtin_worlds())})")
            return
        try:
            load_world(path)
        except SpecError as exc:
            problems.add("world", f"{exc}")
    elif spec.world not in builtin_worlds():
        problems.add("world", f"unknown built-in world {spec.world!r}; expected one of: {', '.join(builtin_worlds())}, or a path to a .yaml world file")


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _model_sections(spec: Spec) -> list[tuple[str, Any]]:
    return [(f"systems.{i}", s) for i, s in enumerate(spec.systems)] + [
        ("judge", spec.judge), ("rollout.user", spec.rollout.user), ("design.generator", spec.design.generator),
        ("rollout.tool_simulator", spec.rollout.tool_simulator),
    ]


def _check_key_envs(spec: Spec, problems: Problems) -> None:
    from .credentials import check_spec_sections

    for where, section in _model_sections(spec):
        name = section.api_key_env
        if name is not None and not _ENV_NAME.fullmatch(name):
            # Never echo the value: it may be a pasted key.
            problems.add(f"{where}.api_key_env", "expected the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key or other text")
    check_spec_sections(_model_sections(spec), problems)


# OpenAI's rule for a function name; a tool call is matched to the tools offered by it.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _check_tools(spec: Spec, problems: Problems) -> None:
    from .toolcode import check_reference

    for i, system in enumerate(spec.systems):
        for j, tool in enumerate(system.tools):
            function = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
            if not isinstance(function.get("name"), str) or not _TOOL_NAME.fullmatch(function["name"]):
                problems.add(f"systems.{i}.tools.{j}", "expected an OpenAI function tool {type: function, function: {name, description, parameters}} whose name is 1-64 of [A-Za-z0-9_-]")
    for tool, reference in spec.rollout.tool_simulator.functions.items():
        problem = check_reference(reference, spec.base_dir)
        if problem is not None:
            problems.add(f"rollout.tool_simulator.functions.{tool}", problem)


def _check_models(spec: Spec, problems: Problems) -> None:
    if not spec.systems:
        problems.add("systems", "expected at least one system")
    for i, s in enumerate(spec.systems):
        _check_model(s.model, f"systems.{i}.model", problems)
    _check_model(spec.judge.model, "judge.model", problems)
    _check_model(spec.rollout.user.model, "rollout.user.model", problems)
    _check_model(spec.design.generator.model, "design.generator.model", problems)
    _check_model(spec.rollout.tool_simulator.model, "rollout.tool_simulator.model", problems)
    _check_offline_names(spec, problems)


def _check_offline_names(spec: Spec, problems: Problems) -> None:
    """Names the model layer can check without a call (sim/ models against the world), for the roles this spec uses."""
    from .model_names import check

    world = spec.world
    if world is not None and world.endswith((".yaml", ".yml")):
        world = str(spec.base_dir / world)
    roles = [(f"systems.{i}", s, "system") for i, s in enumerate(spec.systems)] + [("judge", spec.judge, "judge")]
    if spec.rollout.setting == "multi_turn":
        roles.append(("rollout.user", spec.rollout.user, "user"))
    if spec.cases is None and spec.design.cases is None:
        roles.append(("design.generator", spec.design.generator, "generator"))
    if spec.design.tools or any(s.tools for s in spec.systems):
        roles.append(("rollout.tool_simulator", spec.rollout.tool_simulator, "tool_simulator"))
    for where, section, role in roles:
        persona = getattr(section, "persona", None) if role == "user" else None
        for field_name, problem in check(section.model, role, api_base=section.api_base or world, persona=persona):
            problems.add(f"{where}.{field_name}", problem)


def _check_model(model: str, path: str, problems: Problems) -> None:
    if "/" not in model or model.startswith("/") or model.endswith("/") or any(c.isspace() for c in model):
        problems.add(path, f"expected a litellm model string 'provider/model' (e.g. openai/gpt-4o-mini, sim/atlas), got {model!r}")


def _no_duplicates(values: list[str], path: str, what: str, problems: Problems) -> None:
    seen = set()
    for v in values:
        if v in seen:
            problems.add(path, f"duplicate {what} {v!r}")
        seen.add(v)


def _check_design(spec: Spec, problems: Problems) -> None:
    ids = {c.id for c in spec.rubric.criteria}
    names = [d.name for d in spec.design.dimensions]
    _no_duplicates(names, "design.dimensions", "dimension", problems)
    for i, d in enumerate(spec.design.dimensions):
        if d.name == BEHAVIOR:
            for j, level in enumerate(d.levels):
                if level not in ids:
                    problems.add(f"design.dimensions.{i}.levels.{j}", f"unknown criterion {level!r}; expected one of: {', '.join(sorted(ids))}")
        elif not d.levels:
            problems.add(f"design.dimensions.{i}.levels", f"expected at least one level for dimension {d.name!r}")
    for i, a in enumerate(spec.design.allocation):
        for factor, level in a.cell.items():
            dims = {d.name: d for d in spec.design.dimensions}
            if factor not in dims:
                problems.add(f"design.allocation.{i}.cell.{factor}", f"unknown dimension; expected one of: {', '.join(names)}")
            elif level not in design_levels(spec, factor):
                problems.add(f"design.allocation.{i}.cell.{factor}", f"unknown level {level!r}; expected one of: {', '.join(design_levels(spec, factor))}")
        if a.cases < 0:
            problems.add(f"design.allocation.{i}.cases", "expected an integer >= 0")


def design_levels(spec: Spec, factor: str) -> tuple[str, ...]:
    """The levels of a design dimension (behaviour defaults to impermissible criteria)."""
    for d in spec.design.dimensions:
        if d.name == factor:
            if d.levels:
                return d.levels
            if factor == BEHAVIOR:
                return tuple(c.id for c in spec.rubric.criteria if not c.permissible)
            return ()
    raise KeyError(factor)


@dataclass(frozen=True)
class _CasesFile:
    cases: tuple[Case, ...]


def load_cases(path: Path, spec: Spec) -> tuple[Case, ...]:
    """Load an (edited) cases file and check every case sits in a design cell."""
    document, lines = load_yaml(path)
    problems = Problems(lines)
    built = build(_CasesFile, document, "", problems)
    _raise(path, problems)
    factors = spec.factors
    seen = set()
    for i, case in enumerate(built.cases):
        if case.id in seen:
            problems.add(f"cases.{i}.id", f"duplicate case id {case.id!r}")
        seen.add(case.id)
        if set(case.cell) != set(factors):
            problems.add(f"cases.{i}.cell", f"expected exactly the design factors ({', '.join(factors)})")
            continue
        for factor, level in case.cell.items():
            if level not in design_levels(spec, factor):
                problems.add(f"cases.{i}.cell.{factor}", f"unknown level {level!r}; expected one of: {', '.join(design_levels(spec, factor))}")
        if not (case.brief or case.prompt):
            problems.add(f"cases.{i}", "expected a brief or a prompt")
    _raise(path, problems)
    return built.cases


def check_patch_path(dotted: str, document: dict) -> str | None:
    """``None`` if ``dotted`` addresses a spec field, else what is wrong."""
    return resolve_path(Spec, document, dotted.split("."))
