"""From a spec file to a checked ``Spec``: read, type, check, then the axes.

Each step runs only once the one before found nothing wrong, and collects
every problem it finds, so ``SpecError.problems`` lists them all, one line
each, and the first is the message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from multiverse.core import CAPS, both_spellings, nfc_document
from multiverse.errors import SpecError
from multiverse.spec._axes import check_axes
from multiverse.spec._checks import MINIMA, check_rubric, check_semantics
from multiverse.spec._instructions import check_judge_named
from multiverse.spec._loading import load_yaml
from multiverse.spec._models import Case, CasesFile, Rubric, Spec, design_levels, to_plain
from multiverse.spec._problems import Problems, add_validation_errors

__all__ = ["load_cases", "load_spec", "parse_spec", "resolve_document", "spec_schema", "to_yaml_dict"]

M = TypeVar("M", bound=BaseModel)


def load_spec(path: str | os.PathLike[str], *, cap_universes: bool = True, drafting: bool = False) -> Spec:
    """Load, resolve and validate a spec file.

    The rubric and cases may be paths relative to the spec. Raises ``SpecError``
    with every problem in ``.problems`` (the first one is the message).
    ``cap_universes=False`` accepts a grid with more universes than a run may
    have (``bounds.MAX_UNIVERSES``), to count it; ``expand`` still refuses to list it.
    ``drafting=True`` (what ``draft`` loads with): a ``rubric`` or
    ``design.cases`` file the spec names that is not written yet is where
    that draft goes (:attr:`Spec.draft_files`), and a rubric not written yet
    is no rubric; the cases file is not read (the draft is of generated cases).
    """
    path = Path(path)
    document, lines = load_yaml(path)
    return parse_spec(document, path=path, lines=lines, cap_universes=cap_universes, drafting=drafting)


def parse_spec(document: Any, *, path: Path | None = None, lines: Mapping[str, int] | None = None,
               cap_universes: bool = True, drafting: bool = False) -> Spec:
    """Validate an already-parsed spec document (see ``load_spec``)."""
    file = path if path is not None else "<spec>"
    if not isinstance(document, dict):
        raise SpecError(file, "", "expected a YAML mapping at the top level")
    document = _one_spelling(dict(document), file)
    drafts: dict[str, Path] = {}
    if isinstance(document.get("rubric"), str):
        named = (path.parent if path else Path.cwd()) / document["rubric"]
        if drafting and not os.path.lexists(named):
            drafts["rubric"] = named  # the rubric draft's place: until it is written there is no rubric
            document["rubric"] = None
        else:
            document["rubric"] = _load_rubric_file(document["rubric"], path, lines)
    document = _rubric_options(document, path, lines)
    spec = resolve_document(document, path=path, lines=lines, drafting=drafting, drafts=drafts)
    problems = Problems(lines)
    check_judge_named(spec, problems)
    _raise(file, problems)
    check_axes(spec, problems, lambda patched: resolve_document(patched, path=path, drafting=drafting),
               cap=cap_universes)
    _raise(file, problems)
    return spec


def _rubric_options(document: dict[str, Any], path: Path | None, lines: Mapping[str, int] | None) -> dict[str, Any]:
    """``document`` with each axis option's ``rubric:`` file path replaced by the rubric it names (inline)."""
    axes = document.get("axes")
    if not isinstance(axes, Mapping):
        return document
    resolved: dict[str, Any] = {}
    for axis, options in axes.items():
        if not isinstance(options, Mapping):
            resolved[axis] = options
            continue
        resolved[axis] = {}
        for option, patch in options.items():
            if isinstance(patch, Mapping) and isinstance(patch.get("rubric"), str):
                at = f"axes.{axis}.{option}.rubric"
                patch = {**patch, "rubric": _load_rubric_file(patch["rubric"], path, lines, at=at)}
            resolved[axis][option] = patch
    return {**document, "axes": resolved}


def _load_rubric_file(name: str, path: Path | None, lines: Mapping[str, int] | None, *, at: str = "rubric") -> Any:
    """The rubric file the spec's ``rubric:`` (or an axis option's, ``at``) names, checked against its own lines.

    A file that cannot be read is reported against the spec field that named
    it; a problem inside the rubric, at the rubric file's own line.
    """
    rubric_file = (path.parent if path else Path.cwd()) / name
    if not rubric_file.is_file():
        found = "does not exist" if not rubric_file.exists() else "is not a regular file"
        raise SpecError(path if path is not None else "<spec>", Problems(lines).where(at),
                        f"the rubric file {rubric_file} {found}; expected a rubric YAML file (paths are "
                        f"relative to the spec){', which drafting the spec writes,' if at == 'rubric' else ''} "
                        "or the criteria inline")
    rubric_doc, rubric_lines = load_yaml(rubric_file)
    rubric_doc = _one_spelling(rubric_doc, rubric_file)
    rubric = _validate(Rubric, rubric_doc, rubric_file, rubric_lines)
    problems = Problems(rubric_lines)
    check_rubric(rubric, problems)
    _raise(rubric_file, problems)
    return rubric_doc


def resolve_document(document: dict[str, Any], *, path: Path | None = None, lines: Mapping[str, int] | None = None,
                     drafting: bool = False, drafts: Mapping[str, Path] | None = None) -> Spec:
    """Build and check a spec from a document whose rubric is inline (its axes are not checked).

    ``drafting`` and ``drafts``: see :func:`load_spec` (``drafts``: the files already found missing)."""
    file = path if path is not None else "<spec>"
    # Files the spec names (world, cases) are found relative to it.
    found: dict[str, Path] = dict(drafts or {})
    origin = {"path": path, "document": document, "drafts": found, "drafting": drafting}
    spec = _validate(Spec, document, file, lines, context=origin)
    problems = Problems(lines)
    check_semantics(spec, problems, has_rubric=document.get("rubric") is not None)
    _raise(file, problems)
    if not spec.design.cases:
        return spec
    named = spec.base_dir / spec.design.cases
    if drafting:
        # To draft, the spec's cases are the generated ones; they go into the file the spec names when it is
        # not written yet (else beside the spec, and an existing file is never replaced unless forced).
        found = {**found, **({} if os.path.lexists(named) else {"cases": named})}
        return Spec.model_validate(document, context={**origin, "drafts": found})
    if not os.path.lexists(named):
        raise SpecError(file, Problems(lines).where("design.cases"),
                        f"the cases file {named} does not exist; expected a cases YAML file (paths are relative to "
                        "the spec), which drafting the spec writes")
    cases = load_cases(named, spec)
    # The cases are part of what the spec is: bind them while building it, as the origin.
    return Spec.model_validate(document, context={**origin, "cases": cases})


def load_cases(path: Path, spec: Spec) -> tuple[Case, ...]:
    """Load an (edited) cases file and check every case sits in a design cell."""
    document, lines = load_yaml(path)
    built = _validate(CasesFile, _one_spelling(document, path), path, lines)
    problems = Problems(lines)
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


def _one_spelling(document: Any, file: Any) -> Any:
    """``document`` with its names (every key and text) in NFC; SpecError on two spellings of one name."""
    document, clash = nfc_document(document)
    if clash:
        where, pair = clash
        raise SpecError(file, where, f"two spellings of one name, {both_spellings(pair)}, that look the same; "
                        "expected each name once, in one spelling")
    return document


def _validate(model: type[M], document: Any, file: Any, lines: Mapping[str, int] | None, context: Any = None) -> M:
    """``model`` built from ``document``, or a ``SpecError`` listing every type problem."""
    try:
        return model.model_validate(document, context=context)
    except ValidationError as error:
        problems = Problems(lines)
        add_validation_errors(model, error, problems)
        _raise(file, problems)
        raise  # pragma: no cover - every pydantic error becomes a problem


def _raise(file: Any, problems: Problems) -> None:
    problems.raise_if_any(file)


def to_yaml_dict(spec: Any) -> dict[str, Any]:
    """The spec (or one of its sections) as plain data (YAML-ready); loading it back gives an equal spec."""
    return cast("dict[str, Any]", to_plain(spec))


def spec_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the spec file, for editors, from the same models that validate it."""
    schema = Spec.model_json_schema()
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": "multiverse measurement spec"}
    # A rubric may live in its own file next to the spec, or be left to draft.
    rubric = schema["properties"]["rubric"]
    schema["properties"]["rubric"] = {
        "anyOf": [{k: v for k, v in rubric.items() if k not in ("description", "default")}, {"type": "string"}, {"type": "null"}],
        "description": rubric.get("description", ""),
    }
    # The ranges the checks enforce, so an editor flags them too.
    for path, minimum in MINIMA.items():
        _schema_at(schema, path)["minimum"] = minimum
    for path, cap in CAPS.items():
        _schema_at(schema, path)["maximum"] = cap
    _schema_at(schema, "scoring.ci.level").update(exclusiveMinimum=0, exclusiveMaximum=1)
    return schema


def _schema_at(schema: dict[str, Any], dotted: str) -> dict[str, Any]:
    """The schema of the field at ``dotted`` (through ``$ref``, optional values and list items)."""
    node = schema
    for part in dotted.split("."):
        node = _resolved(schema, node)
        node = node["items"] if node.get("type") == "array" else node
        node = _resolved(schema, node)["properties"][part]
    node = _resolved(schema, node)
    return node


def _resolved(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in node:  # X | None: the X
        node = next(n for n in node["anyOf"] if n.get("type") != "null")
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node
