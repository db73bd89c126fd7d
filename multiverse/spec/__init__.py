"""The measurement spec: one YAML file, loaded into frozen pydantic models.

Every measurement choice of an audit is a field here, so that every reported
rate is bound to a written spec and any choice can become an axis::

    name: demo
    concept:  {name, description, context}
    rubric:   {criteria: [...]}  or  a path to a rubric YAML file
    design:   {dimensions, cases_per_cell, allocation, generator, cases}
    systems:  [{name, model, system_prompt, params, ...}]
    rollout:  {setting, max_turns, user: {...}, replicates, seed, tool_simulator}
    judge:    {model, params, evidence_standard, samples, scale, order, system_prompt, template}
    scoring:  {rule, estimator, ci: {method, level, n_boot}}
    axes:     {axis: {option: {dotted.path: value}}}
    exclude:  [{axis: option or [options]}]
    sample:   {n, method, seed}
    primary:  {axis: option}
    rate_limits: {model prefix: {rpm, tpm, max_concurrency}}
    batch:    {roles: [generator | systems | user | tool_simulator | judge], window, poll}

``load_spec(path)`` validates everything at once and raises a ``SpecError``
whose ``problems`` lists one line per problem, ``file: yaml.path (line N):
expected ...``. Loading is safe: YAML tags that would build Python objects
are rejected. ``spec_schema()`` is the JSON Schema of the same models.

The spec knows nothing downstream: the grid, the pipeline and the model
layer import it, never the other way round.
"""

from __future__ import annotations

from multiverse.core import MAX_FILE_BYTES, ModelConfig, RateLimit, expand_env
from multiverse.spec._axes import apply_patch, check_patch_path
from multiverse.spec._loading import load_yaml
from multiverse.spec._models import (
    BATCH_ROLES,
    BEHAVIOR,
    CI,
    Allocation,
    Batch,
    Case,
    Concept,
    Criterion,
    Design,
    Dimension,
    Generator,
    Judge,
    Rollout,
    Rubric,
    Sample,
    Scale,
    Scoring,
    SimulatedUser,
    Spec,
    System,
    ToolSimulator,
    design_levels,
)
from multiverse.spec._parse import load_cases, load_spec, parse_spec, resolve_document, spec_schema, to_yaml_dict
from multiverse.spec._problems import Problems, add_validation_errors

__all__ = [
    "BATCH_ROLES",
    "BEHAVIOR",
    "CI",
    "MAX_FILE_BYTES",
    "Allocation",
    "Batch",
    "Case",
    "Concept",
    "Criterion",
    "Design",
    "Dimension",
    "Generator",
    "Judge",
    "ModelConfig",
    "Problems",
    "RateLimit",
    "Rollout",
    "Rubric",
    "Sample",
    "Scale",
    "Scoring",
    "SimulatedUser",
    "Spec",
    "System",
    "ToolCodeError",
    "ToolSimulator",
    "Universe",
    "UniverseCount",
    "add_validation_errors",
    "apply_patch",
    "axis_stages",
    "batch_problem",
    "case_counts",
    "check_patch_path",
    "count_grid",
    "design_levels",
    "expand",
    "expand_env",
    "load_cases",
    "load_function",
    "load_spec",
    "load_yaml",
    "parse_spec",
    "parse_yaml",
    "planned_cases",
    "resolve_document",
    "resolve_references",
    "spec_schema",
    "template_placeholders",
    "to_yaml_dict",
    "universe_count",
]

from multiverse.spec._checks import batch_problem
from multiverse.spec._design import case_counts, planned_cases
from multiverse.spec._grid import Universe, axis_stages, count_grid, expand
from multiverse.spec._instructions import template_placeholders
from multiverse.spec._loading import parse_yaml
from multiverse.spec._size import UniverseCount, universe_count
from multiverse.spec._toolcode import ToolCodeError, load_function, resolve_references
