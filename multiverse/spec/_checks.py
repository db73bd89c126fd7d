"""What a spec's types cannot say: cross-field rules, names, sizes, models, files.

Run once the spec has its types right, so each rule can trust the values it
reads; every problem is collected, so the author sees them all at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from multiverse.core import check_spec_sections, is_simulated, model_names, name_problem
from multiverse.spec._bounds import check_sizes
from multiverse.spec._instructions import check_templates
from multiverse.spec._models import BATCH_ROLES, BEHAVIOR, Rubric, Spec, design_levels
from multiverse.spec._problems import Problems
from multiverse.spec._toolcode import check_reference

__all__ = ["MINIMA", "check_rubric", "check_semantics"]

#: The smallest value of each numeric field (YAML path); the caps are ``bounds.CAPS``.
MINIMA = {
    "design.cases_per_cell": 1,
    "design.allocation.cases": 0,
    "rollout.max_turns": 1,
    "rollout.replicates": 1,
    "judge.samples": 1,
    "scoring.ci.n_boot": 10,
    "sample.n": 1,
}


def check_semantics(spec: Spec, problems: Problems, *, has_rubric: bool) -> None:
    """Add every rule ``spec`` breaks; ``has_rubric`` is False for a spec whose rubric is still to be drafted."""
    check_rubric(spec.rubric, problems, at="rubric.", required=has_rubric)
    _no_duplicates([s.name for s in spec.systems], "systems", "system name", problems)
    levels = sorted({lvl for c in spec.rubric.criteria for lvl in c.evidence})
    if levels and spec.judge.evidence_standard not in levels:
        problems.add("judge.evidence_standard", f"expected one of the rubric's evidence levels ({', '.join(levels)}), got {spec.judge.evidence_standard!r}")
    wrong_name = name_problem(spec.name)
    if wrong_name:
        problems.add("name", wrong_name)
    _check_models(spec, problems)
    for name, value in (
        ("design.cases_per_cell", spec.design.cases_per_cell),
        ("rollout.max_turns", spec.rollout.max_turns),
        ("rollout.replicates", spec.rollout.replicates),
        ("judge.samples", spec.judge.samples),
        ("scoring.ci.n_boot", spec.scoring.ci.n_boot),
    ):
        if value < MINIMA[name]:
            problems.add(name, f"expected an integer >= {MINIMA[name]}, got {value}")
    if not 0 < spec.scoring.ci.level < 1:
        problems.add("scoring.ci.level", f"expected a number between 0 and 1, got {spec.scoring.ci.level}")
    check_sizes(spec, problems)
    if spec.scoring.rule == "majority_of_samples" and spec.judge.samples < 2:
        problems.add("scoring.rule", "majority_of_samples needs judge.samples >= 2")
    if spec.world is not None:
        problem = model_names.check_world(spec.world, spec.base_dir)
        if problem is not None:
            problems.add("world", problem)
    _check_scale(spec, problems)
    check_templates(spec, problems)
    _check_key_envs(spec, problems)
    _check_tools(spec, problems)
    _check_rate_limits(spec, problems)
    _check_batch(spec, problems)
    if has_rubric:
        _check_design(spec, problems)


#: Estimators that read a score; the share estimators read compliance labels (or a binary score).
_SCORE_ESTIMATORS = ("mean", "at_least", "win_rate")


def _check_scale(spec: Spec, problems: Problems) -> None:
    """A declared scale is a real range, and the estimator reads what the judge gives."""
    scale, scoring = spec.judge.scale, spec.scoring
    if scale.scored and not scale.min < scale.max:
        problems.add("judge.scale.max", f"expected a number above judge.scale.min ({scale.min:g}), got {scale.max:g}")
    if scale.type == "ordinal" and not (float(scale.min).is_integer() and float(scale.max).is_integer()):
        problems.add("judge.scale", f"an ordinal scale runs between whole numbers, got {scale.min:g} to {scale.max:g}")
    for point in scale.anchors:
        try:
            value = float(point)
        except ValueError:
            problems.add(f"judge.scale.anchors.{point}", "expected a score on the scale as the key")
            continue
        if not scale.min <= value <= scale.max:
            problems.add(f"judge.scale.anchors.{point}", f"expected a score from {scale.min:g} to {scale.max:g}")
    _check_reference(spec, problems)
    # mean too: a binary judge gives no score to average, and its rate was refused only after the paid calls.
    if scoring.estimator in _SCORE_ESTIMATORS and not scale.scored:
        problems.add("scoring.estimator", f"{scoring.estimator} reads a score; declare judge.scale (ordinal, continuous "
                     "or pairwise), or count labels with pooled or cell_balanced")
    if scoring.unparsed == "tie" and scale.type != "pairwise":
        problems.add("scoring.unparsed", f"a {scale.type} scale has no tie (only a pairwise one: its midpoint); "
                     "expected exclude or against")
    if scoring.orders != "mean" and spec.judge.order != "both":
        problems.add("scoring.orders", f"{scoring.orders} combines the two orders of judge.order: both; got judge.order "
                     f"{spec.judge.order!r}")
    if scoring.estimator == "win_rate" and scale.type != "pairwise":
        problems.add("scoring.estimator", "win_rate needs a pairwise judge.scale")
    if scoring.estimator in ("pooled", "cell_balanced") and scale.scored:
        problems.add("scoring.estimator", f"a {scale.type} scale is estimated by mean, at_least or win_rate, got {scoring.estimator!r}")
    if scoring.estimator == "at_least":
        if scoring.cut is None:
            problems.add("scoring.cut", "at_least needs a cut: the lowest score that counts")
        elif not scale.min <= scoring.cut <= scale.max:
            problems.add("scoring.cut", f"expected a score from {scale.min:g} to {scale.max:g}, got {scoring.cut:g}")


def _check_reference(spec: Spec, problems: Problems) -> None:
    """A pairwise scale names one of the systems as its reference; no other scale has one."""
    scale = spec.judge.scale
    names = [s.name for s in spec.systems]
    if scale.type == "pairwise":
        if scale.reference is None:
            problems.add("judge.scale.reference", "a pairwise scale names the reference system")
        elif scale.reference not in names:
            problems.add("judge.scale.reference", f"expected one of the systems ({', '.join(names)}), got {scale.reference!r}")
    elif scale.reference is not None:
        problems.add("judge.scale.reference", "only a pairwise scale has a reference system")
    if scale.compare_reference and scale.type != "pairwise":
        problems.add("judge.scale.compare_reference", "only a pairwise scale compares a reference system with itself")


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _model_sections(spec: Spec) -> list[tuple[str, Any]]:
    return [(f"systems.{i}", s) for i, s in enumerate(spec.systems)] + [
        ("judge", spec.judge), ("rollout.user", spec.rollout.user), ("design.generator", spec.design.generator),
        ("rollout.tool_simulator", spec.rollout.tool_simulator),
    ]


def _check_key_envs(spec: Spec, problems: Problems) -> None:
    for where, section in _model_sections(spec):
        name = section.api_key_env
        if name is not None and not _ENV_NAME.fullmatch(name):
            # Never echo the value: it may be a pasted key.
            problems.add(f"{where}.api_key_env", "expected the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key or other text")
    check_spec_sections(_model_sections(spec), problems)


# OpenAI's rule for a function name; a tool call is matched to the tools offered by it.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _check_tools(spec: Spec, problems: Problems) -> None:
    for i, system in enumerate(spec.systems):
        for j, tool in enumerate(system.tools):
            wrapped = tool.get("function")
            function: Mapping[str, Any] = wrapped if isinstance(wrapped, Mapping) else tool
            if not isinstance(function.get("name"), str) or not _TOOL_NAME.fullmatch(function["name"]):
                problems.add(f"systems.{i}.tools.{j}", "expected an OpenAI function tool {type: function, function: {name, description, parameters}} whose name is 1-64 of [A-Za-z0-9_-]")
    for name, reference in spec.rollout.tool_simulator.functions.items():
        problem = check_reference(reference, spec.base_dir)
        if problem is not None:
            problems.add(f"rollout.tool_simulator.functions.{name}", problem)


# A prefix names a provider and optionally the start of its model names: openai/, openai/gpt-4o.
_PREFIX = re.compile(r"[A-Za-z0-9_.-]+/\S*")


def _check_rate_limits(spec: Spec, problems: Problems) -> None:
    for prefix in spec.rate_limits:
        if not _PREFIX.fullmatch(prefix):
            problems.add(f"rate_limits.{prefix}", "expected a model-string prefix 'provider/' or 'provider/model-start' "
                                                  "(e.g. openai/, anthropic/claude-haiku), without spaces")


#: Providers whose batch API the model layer speaks (OpenAI's files and batches endpoints).
BATCH_PROVIDERS = ("openai",)


def batch_role_models(spec: Spec) -> dict[str, list[tuple[str, str]]]:
    """Role named in ``batch.roles`` -> (spec path, model) of each model playing it in ``spec``."""
    models = {"generator": [("design.generator.model", spec.design.generator.model)],
              "systems": [(f"systems.{i}.model", s.model) for i, s in enumerate(spec.systems)],
              "user": [("rollout.user.model", spec.rollout.user.model)],
              "tool_simulator": [("rollout.tool_simulator.model", spec.rollout.tool_simulator.model)],
              "judge": [("judge.model", spec.judge.model)]}
    assert set(models) == set(BATCH_ROLES)  # a role added to the spec's list is checked here too
    return {role: models[role] for role in spec.batch.roles}


def batch_problem(model: str) -> str | None:
    """Why ``model`` cannot be batched, or None (a sim/ model answers at once and is never batched)."""
    provider = model.partition("/")[0]
    if provider in BATCH_PROVIDERS or is_simulated(model):
        return None
    return (f"expected a model of a provider with a batch API ({', '.join(p + '/' for p in BATCH_PROVIDERS)} or an "
            f"OpenAI-compatible api_base), got {model!r}; take its role out of batch.roles")


def _check_batch(spec: Spec, problems: Problems) -> None:
    _no_duplicates(list(spec.batch.roles), "batch.roles", "role", problems)
    for models in batch_role_models(spec).values():
        for path, model in models:
            problem = batch_problem(model)
            if problem is not None:
                problems.add(path, f"batch.roles: {problem}")


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
    world = spec.world
    if world is not None and world.endswith((".yaml", ".yml")):
        world = str(spec.base_dir / world)
    roles: list[tuple[str, Any, str]] = [(f"systems.{i}", s, "system") for i, s in enumerate(spec.systems)]
    roles.append(("judge", spec.judge, "judge"))
    if spec.rollout.setting == "multi_turn":
        roles.append(("rollout.user", spec.rollout.user, "user"))
    if spec.cases is None and spec.design.cases is None:
        roles.append(("design.generator", spec.design.generator, "generator"))
    if spec.design.tools or any(s.tools for s in spec.systems):
        roles.append(("rollout.tool_simulator", spec.rollout.tool_simulator, "tool_simulator"))
    for where, section, role in roles:
        persona = getattr(section, "persona", None) if role == "user" else None
        for field_name, problem in model_names.check(section.model, role, api_base=section.api_base or world, persona=persona):
            problems.add(f"{where}.{field_name}", problem)


def _check_model(model: str, path: str, problems: Problems) -> None:
    if "/" not in model or model.startswith("/") or model.endswith("/") or any(c.isspace() for c in model):
        problems.add(path, f"expected a litellm model string 'provider/model' (e.g. openai/gpt-4o-mini, sim/atlas), got {model!r}")


def check_rubric(rubric: Rubric, problems: Problems, *, at: str = "", required: bool = True) -> None:
    """The rubric's own rules; ``at`` is where it sits (``"rubric."`` inline in a spec, ``""`` in a file
    of its own, so a problem is reported at the rubric file's line)."""
    ids = [c.id for c in rubric.criteria]
    if required and not ids:
        problems.add(f"{at}criteria", "expected at least one criterion")
    _no_duplicates(ids, f"{at}criteria", "criterion id", problems)
    levels = sorted({lvl for c in rubric.criteria for lvl in c.evidence})
    for i, c in enumerate(rubric.criteria):
        if levels and set(c.evidence) != set(levels):
            problems.add(f"{at}criteria.{i}.evidence", f"expected a text for every evidence level ({', '.join(levels)})")


def _no_duplicates(values: list[str], path: str, what: str, problems: Problems) -> None:
    seen = set()
    for v in values:
        if v in seen:
            problems.add(path, f"duplicate {what} {v!r}")
        seen.add(v)


def _check_design(spec: Spec, problems: Problems) -> None:
    ids = {c.id for c in spec.rubric.criteria}
    names = [d.name for d in spec.design.dimensions]
    dims = {d.name: d for d in spec.design.dimensions}
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
            if factor not in dims:
                problems.add(f"design.allocation.{i}.cell.{factor}", f"unknown dimension; expected one of: {', '.join(names)}")
            elif level not in design_levels(spec, factor):
                problems.add(f"design.allocation.{i}.cell.{factor}", f"unknown level {level!r}; expected one of: {', '.join(design_levels(spec, factor))}")
        if a.cases < MINIMA["design.allocation.cases"]:
            problems.add(f"design.allocation.{i}.cases", f"expected an integer >= {MINIMA['design.allocation.cases']}")
