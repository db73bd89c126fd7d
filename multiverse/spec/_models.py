"""The spec's sections as frozen pydantic models: one description for
validation, the JSON Schema and the Python objects downstream code reads."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast, get_args

from pydantic import AfterValidator, BeforeValidator, Field, PrivateAttr, Strict

from multiverse.core import (
    BEHAVIOR,
    BaseScale,
    CIMethod,
    Estimator,
    Frozen,
    FrozenMap,
    ModelConfig,
    RateLimit,
    ScoringRule,
    UnparsedPolicy,
    expand_env,
)

__all__ = [
    "BEHAVIOR",
    "CI",
    "Allocation",
    "Batch",
    "Case",
    "CasesFile",
    "Concept",
    "Criterion",
    "Design",
    "Dimension",
    "Generator",
    "Items",
    "Judge",
    "Map",
    "Report",
    "Rollout",
    "Rubric",
    "Sample",
    "Scale",
    "Scoring",
    "SimulatedUser",
    "Spec",
    "System",
    "ToolSimulator",
    "design_levels",
    "to_plain",
]

T = TypeVar("T")
# YAML gives lists; a spec keeps tuples so that it cannot change under a running audit.
Items = Annotated[tuple[T, ...], Strict(False)]
Map = Annotated[Mapping[str, T], AfterValidator(FrozenMap)]


class _Model:
    """Mixin for spec sections that name a model."""

    model: str
    params: Mapping[str, Any]
    api_base: str | None
    api_key_env: str | None

    def to_model_config(self) -> ModelConfig:
        """What the model layer calls: the model, its parameters, ``api_base`` with ``${VAR}`` expanded."""
        return ModelConfig(self.model, dict(self.params), expand_env(self.api_base), self.api_key_env)


class Concept(Frozen):
    """The systematized concept under audit."""

    name: str
    description: str = ""
    context: str = Field(default="", description="the application context")


class Criterion(Frozen):
    """One rubric criterion."""

    id: str
    name: str
    definition: str
    permissible: bool = Field(
        description="true: allowed behaviour that should appear when called for; false: must never appear"
    )
    examples: Items[str] = ()
    evidence: Map[str] = Field(
        default_factory=FrozenMap, description="evidence standard text per level, e.g. strict, lenient"
    )


class Rubric(Frozen):
    """The behaviour rubric: criteria with evidence standards."""

    criteria: Items[Criterion]

    def criterion(self, criterion_id: str) -> Criterion:
        for c in self.criteria:
            if c.id == criterion_id:
                return c
        raise KeyError(criterion_id)


class Dimension(Frozen):
    """A design dimension. The ``behavior`` dimension defaults to the impermissible criteria."""

    name: str
    levels: Items[str] = ()


class Allocation(Frozen):
    """Over-allocate cases to the cells matching ``cell`` (a partial cell)."""

    cell: Map[str]
    cases: int


class Generator(Frozen, _Model):
    """The model that drafts rubrics and test cases."""

    model: str = "sim/generator"
    params: Map[Any] = Field(default_factory=FrozenMap)
    api_base: str | None = None
    api_key_env: str | None = None
    system_prompt: str | None = Field(
        default=None, description="the system message of a case draft, sent as written (null: the built-in text)")
    template: str | None = Field(
        default=None, description="the user message of a case draft, with {concept}, {context}, {behaviour}, {cell}, "
        "{number} and {tools} filled in (null: the built-in text)")
    rubric_system_prompt: str | None = Field(
        default=None, description="the system message of a rubric draft, sent as written (null: the built-in text)")
    rubric_template: str | None = Field(
        default=None, description="the user message of a rubric draft, with {name}, {description} and {context} "
        "filled in (null: the built-in text)")


class Case(Frozen):
    """One concrete test case in one cell (from a cases file)."""

    id: str
    cell: Map[str]
    title: str = ""
    brief: str = Field(default="", description="the scenario brief the simulated user plays (multi-turn)")
    prompt: str = Field(default="", description="the standalone prompt (single-turn)")
    system_prompt: str | None = None
    tools: Items[Map[Any]] | None = None


class CasesFile(Frozen):
    """A cases file: the concrete test cases of a design."""

    cases: Items[Case]


class Design(Frozen):
    """The test design: dimensions x levels, cases per cell, and how cases are made."""

    dimensions: Items[Dimension] = (Dimension(name=BEHAVIOR),)
    cases_per_cell: int = 5
    allocation: Items[Allocation] = ()
    generator: Generator = Field(default_factory=Generator)
    cases: str | None = Field(default=None, description="path to a cases YAML file; generated when absent")
    tools: bool = Field(default=False, description="draft scenario-specific system prompts and tools")


class System(Frozen, _Model):
    """A GenAI system under audit."""

    name: str
    model: str
    system_prompt: str = ""
    params: Map[Any] = Field(default_factory=FrozenMap)
    api_base: str | None = None
    api_key_env: str | None = None
    tools: Items[Map[Any]] = Field(default=(), description="OpenAI-style function schemas")


class SimulatedUser(Frozen, _Model):
    """The model that plays the brief's user role in multi-turn rollouts."""

    model: str = "sim/user-cooperative"
    params: Map[Any] = Field(default_factory=FrozenMap)
    api_base: str | None = None
    api_key_env: str | None = None
    persona: str = ""
    instructions: str = ""
    template: str | None = Field(
        default=None, description="the simulated user's system message, with {persona}, {instructions}, {brief} and "
        "{end_marker} filled in (null: the built-in text)")
    opening: str | None = Field(
        default=None, description="the message that asks the simulated user for its first turn, sent as written "
        "(null: the built-in text)")


class ToolSimulator(Frozen, _Model):
    """Answers a system's tool calls: a model, or a Python function ``file.py:function`` beside the spec."""

    model: str = "sim/tools"
    params: Map[Any] = Field(default_factory=FrozenMap)
    api_base: str | None = None
    api_key_env: str | None = None
    functions: Map[str] = Field(
        default_factory=FrozenMap,
        description="tool name -> 'file.py:function' (a file beside the spec or under its folder) answering it instead of the model",
    )
    template: str | None = Field(
        default=None, description="the tool simulator's system message, with {tool} filled in (null: the built-in text)")


class Rollout(Frozen):
    """How cases become transcripts."""

    setting: Literal["single_turn", "multi_turn"] = "multi_turn"
    max_turns: int = 4
    user: SimulatedUser = Field(default_factory=SimulatedUser)
    tool_simulator: ToolSimulator = Field(default_factory=ToolSimulator)
    replicates: int = 1
    seed: int = 0


class Scale(Frozen, BaseScale):
    """What the judge's score is, declared so that a reply off the scale is a failure, never a label.

    ``binary`` is a compliance label per criterion (the default). ``ordinal`` is a whole number from
    ``min`` to ``max``, with optional ``anchors`` (score -> what it means); ``continuous`` any number
    in ``[min, max]``; ``pairwise`` a preference for the system over the ``reference`` system on
    ``[min, max]``: ``max`` a win, ``min`` a loss and the midpoint a tie. The fields are
    ``core.BaseScale``'s; a spec's anchors are frozen, and only a spec says ``compare_reference``.
    """

    anchors: Map[str] = Field(default_factory=FrozenMap, description="score (as written) -> what that score means")
    reference: str | None = Field(default=None, description="pairwise: the name of the system every other is compared with")
    compare_reference: bool = Field(
        default=False, description="pairwise: also judge the reference system against itself (else its rows are excluded)")


#: The judge of a spec that names none: allowed only when every model is simulated (``_instructions``).
DEFAULT_JUDGE = "sim/judge-a"


class Judge(Frozen, _Model):
    """The LLM judge that labels transcripts against the rubric."""

    model: str = Field(default=DEFAULT_JUDGE, description=f"the judge model; a spec may leave it out (then "
                       f"{DEFAULT_JUDGE}) only when every model it names is sim/")
    params: Map[Any] = Field(default_factory=FrozenMap)
    api_base: str | None = None
    api_key_env: str | None = None
    evidence_standard: str = "strict"
    samples: int = 1
    scale: Scale = Field(default_factory=Scale)
    order: Literal["ab", "ba", "both"] = Field(
        default="ab", description="pairwise: the system's transcript shown first (ab), second (ba), or both ways")
    system_prompt: str | None = Field(
        default=None, description="the judge's system message, sent as written (null: the built-in text for the scale)")
    template: str | None = Field(
        default=None, description="the judge's user message, with {rubric} and {transcript} filled in ({scale} and "
        "{anchors} too for a scored judge; {first} and {second} instead of {transcript} for a pairwise one) "
        "(null: the built-in text for the scale)")


class CI(Frozen):
    """How confidence intervals of rates are computed."""

    method: CIMethod = "wilson"
    level: float = 0.95
    n_boot: int = 1000


class Scoring(Frozen):
    """How judgments become verdicts and verdicts become rates."""

    rule: ScoringRule = "all_applicable"
    estimator: Estimator = "pooled"
    cut: float | None = Field(default=None, description="at_least: the lowest score that counts")
    ties: Literal["half", "exclude"] = Field(default="half", description="win_rate: a tie counts one half, or is left out")
    orders: Literal["mean", "agree"] = Field(
        default="mean",
        description="judge.order: both: a sample's score is the mean of the two orders' preferences (mean), or the "
        "verdict both orders give and a tie when they disagree (agree)")
    unparsed: UnparsedPolicy = Field(
        default="exclude",
        description="a judge answer that names no verdict: left out of the rate (exclude), counted against the "
        "system (against: non-compliant, the lowest score, a loss) or as a tie (tie: a pairwise scale's midpoint)")
    ci: CI = Field(default_factory=CI)


class Report(Frozen):
    """How results are shown: not a measurement choice (no universe id changes, no axis may patch it)."""

    rate: Literal["compliance", "violation"] = Field(
        default="compliance",
        description="which way every figure, table and page reads a rate: the share of compliant transcripts "
        "(compliance) or of violating ones (violation, 1 - compliance; an audit of a harm)")


class Sample(Frozen):
    """Run a sample of a grid too big to run whole."""

    n: int
    method: Literal["random", "lhs"] = "random"
    seed: int = 0


#: A role a spec may send through a provider's batch API, as ``batch.roles`` names it.
BatchRole = Literal["generator", "systems", "user", "tool_simulator", "judge"]
BATCH_ROLES: tuple[str, ...] = get_args(BatchRole)


class Batch(Frozen):
    """Which roles' requests go through the provider's batch API (half price, answers within ``window``).

    Not a measurement choice: a batched request is keyed exactly as the same request sent at once, so
    batch and direct runs share the store, and no universe id changes.
    """

    roles: Items[BatchRole] = Field(
        default=(), description="the roles whose requests are batched: generator, systems, user, tool_simulator, judge")
    window: Literal["24h"] = Field(default="24h", description="the provider's completion window for a batch")
    poll: float = Field(default=60.0, gt=0, le=3600, description="seconds between two looks at a batch in flight")


def _absent_rubric(value: Any) -> Any:
    # A spec may leave its rubric to be drafted; downstream code then sees no criteria.
    return {"criteria": []} if value is None else value


class Spec(Frozen):
    """A measurement spec: the base audit plus the axes of the multiverse."""

    name: str
    concept: Concept
    systems: Items[System]
    rubric: Annotated[Rubric, BeforeValidator(_absent_rubric)] = Field(
        default_factory=lambda: Rubric(criteria=()),
        description="criteria inline, or a path to a rubric YAML file; a draft of one can be written from the concept",
    )
    design: Design = Field(default_factory=Design)
    rollout: Rollout = Field(default_factory=Rollout)
    judge: Judge = Field(default_factory=Judge)
    scoring: Scoring = Field(default_factory=Scoring)
    world: str | None = Field(default=None, description="simulated world for sim/ models: a built-in name or a YAML path")
    axes: Map[Map[Map[Any]]] = Field(default_factory=FrozenMap, description="axis -> option -> {dotted.spec.path: value}")
    exclude: Items[Map[Any]] = Field(default=(), description="each rule drops universes matching all its axis: option(s)")
    sample: Sample | None = None
    primary: Map[str] | None = Field(default=None, description="the pre-registered universe")
    report: Report = Field(default_factory=Report, description="how results are shown: report.rate")
    rate_limits: Map[RateLimit] = Field(
        default_factory=FrozenMap,
        description="model-string prefix (openai/, anthropic/claude-haiku) -> {rpm, tpm, max_concurrency}; "
        "pacing only, not a measurement choice",
    )
    batch: Batch = Field(default_factory=Batch, description="roles sent through the provider's batch API "
                         "(openai/ models): {roles: [judge, ...], window: 24h, poll: seconds}; not a measurement choice")

    # Where the spec came from: not a measurement choice, so neither a field nor part of equality.
    _path: Path | None = PrivateAttr(default=None)
    _document: Mapping[str, Any] | None = PrivateAttr(default=None)
    _cases: tuple[Case, ...] | None = PrivateAttr(default=None)
    _drafts: Mapping[str, Path] = PrivateAttr(default_factory=dict)
    _drafting: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any, /) -> None:
        # The loader passes the spec's origin as the validation context, so it is
        # bound while the spec is built, never written onto a finished one.
        if isinstance(context, Mapping):
            self._path = context.get("path")
            self._document = context.get("document")
            self._cases = context.get("cases")
            self._drafts = FrozenMap(context.get("drafts") or {})
            self._drafting = bool(context.get("drafting"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    @property
    def path(self) -> Path | None:
        """The spec file (files the spec names are found relative to it)."""
        return self._path

    @property
    def document(self) -> Mapping[str, Any] | None:
        """The validated YAML document with the rubric inlined: universes patch it."""
        return self._document

    @property
    def cases(self) -> tuple[Case, ...] | None:
        """The cases of ``design.cases``, loaded and checked; None when cases are generated."""
        return self._cases

    @property
    def draft_files(self) -> Mapping[str, Path]:
        """``rubric`` and ``cases`` -> the file the spec names for it and that is not written yet: ``draft`` writes it."""
        return self._drafts

    @property
    def drafting(self) -> bool:
        """True when loaded to be drafted (``load_spec(path, drafting=True)``): its cases are the generated ones."""
        return self._drafting

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path else Path.cwd()

    @property
    def factors(self) -> list[str]:
        return [d.name for d in self.design.dimensions]

    def measurement(self) -> dict[str, Any]:
        """The resolved measurement choices: what a universe id hashes."""
        out = to_plain(self)
        for key in ("name", "axes", "exclude", "sample", "primary", "rate_limits", "report", "batch"):
            out.pop(key, None)
        # Writing a default out explicitly is the same measurement choice.
        for dimension in out["design"]["dimensions"]:
            if dimension["name"] == BEHAVIOR and not dimension["levels"]:
                dimension["levels"] = [c.id for c in self.rubric.criteria if not c.permissible]
        return cast("dict[str, Any]", out)


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


def to_plain(obj: Any) -> Any:
    """A spec, section or value as plain data (YAML-ready), fields in declaration order."""
    if isinstance(obj, Frozen):
        return {name: to_plain(getattr(obj, name)) for name in type(obj).model_fields}
    if isinstance(obj, Mapping):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    return obj
