"""Draft stage: the generator model drafts a rubric and the test cases.

Drafts are starting points for people: ``multiverse draft SPEC`` writes them
as editable YAML into the files the spec names (``rubric:``, ``design.cases:``)
when they are not written yet, else beside the spec (``<name>.rubric.yaml``,
``<name>.cases.yaml``).
Once the spec points at the edited files (``rubric:`` and ``design.cases:``),
``run`` uses them, and an edit invalidates only what depends on it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from multiverse.model import Completion, ModelClient
from multiverse.work import RUBRIC_SCHEMA, case_schema, draft_case_messages, draft_rubric_messages

from ..errors import ModelError, SpecError
from ..spec import BEHAVIOR, ModelConfig, Spec

__all__ = ["check_draft_places", "draft_case", "draft_place", "draft_rubric", "write_drafts"]


def draft_case(client: ModelClient, spec: Spec, config: ModelConfig, cell: Mapping[str, str], index: int, *,
               seed: int) -> tuple[dict[str, Any], Completion]:
    """Ask the generator for one case of ``cell``. Returns the case fields and the completion."""
    criterion = None
    if BEHAVIOR in cell:
        try:
            criterion = spec.rubric.criterion(cell[BEHAVIOR])
        except KeyError:
            criterion = None
    generator = spec.design.generator
    messages = draft_case_messages(spec.concept, criterion, cell, index, tools=spec.design.tools,
                                   system=generator.system_prompt, template=generator.template)
    completion = client.complete(config, messages, seed=seed, schema=case_schema(spec.design.tools), schema_name="case",
                                 task=messages.task)
    answer = completion.parsed if isinstance(completion.parsed, dict) else {}
    case = {
        "title": str(answer.get("title", "")),
        "brief": str(answer.get("brief", "")),
        "prompt": str(answer.get("prompt", "")),
        "system_prompt": answer.get("system_prompt") or None,
        "tools": _function_tools(answer.get("tools")) or None,
    }
    if not (case["brief"] or case["prompt"]):
        raise ModelError("the generator returned a case with neither a brief nor a prompt", reason="empty_case")
    return case, completion


def _function_tools(drafted: Any) -> list[dict[str, Any]]:
    """Drafted tools -> OpenAI function schemas; a tool whose parameters are not
    a JSON-schema object gets an empty parameter list rather than a guess."""
    import json

    tools = []
    for tool in drafted or []:
        if not isinstance(tool, dict) or not tool.get("name"):
            continue
        try:
            parameters = json.loads(tool.get("parameters_json") or "{}")
        except ValueError:
            parameters = {}
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            parameters = {"type": "object", "properties": {}}
        tools.append({"type": "function", "function": {"name": str(tool["name"]),
                      "description": str(tool.get("description", "")), "parameters": parameters}})
    return tools


def draft_rubric(client: ModelClient, spec: Spec, config: ModelConfig, *, seed: int = 0) -> dict[str, Any]:
    """Ask the generator to systematize the concept into criteria (plus discarded alternatives)."""
    generator = spec.design.generator
    messages = draft_rubric_messages(spec.concept, system=generator.rubric_system_prompt, template=generator.rubric_template)
    completion = client.complete(config, messages, seed=seed, schema=RUBRIC_SCHEMA, schema_name="rubric_draft",
                                 task=messages.task)
    answer = completion.parsed if isinstance(completion.parsed, dict) else {}
    criteria = []
    for c in answer.get("criteria", []):
        criteria.append(
            {
                "id": str(c["id"]),
                "name": str(c["name"]),
                "definition": str(c["definition"]),
                "permissible": bool(c["permissible"]),
                "examples": [str(e) for e in c.get("examples", [])],
                "evidence": {str(k): str(v) for k, v in c.get("evidence", {}).items()},
            }
        )
    if not criteria:
        raise ModelError("the generator drafted no criteria", reason="empty_rubric")
    return {"criteria": criteria, "discarded": answer.get("discarded", []), "completion": completion}


def draft_place(spec: Spec, kind: str) -> Path:
    """Where the ``kind`` draft (``rubric`` or ``cases``) goes: the file the spec names, else ``<spec>.<kind>.yaml``."""
    named = spec.draft_files.get(kind)
    if named is not None:
        return named
    return spec.base_dir / f"{spec.path.stem if spec.path else spec.name}.{kind}.yaml"


def check_draft_places(spec: Spec, kinds: list[str], *, force: bool = False) -> None:
    """Refuse, before anything is drafted (and paid), a draft that could not be written: ``SpecError``."""
    for kind in kinds:
        path = draft_place(spec, kind)
        if os.path.lexists(path) and not force:
            raise SpecError(path, "", "already exists; expected a new file (force=True overwrites it and your edits)")
        if not path.parent.is_dir():
            raise SpecError(path, "", f"its folder {path.parent} does not exist; expected the draft's file in a "
                            "folder that exists")
        if os.path.lexists(path) and not path.is_file():
            raise SpecError(path, "", "is not a regular file; expected a file the draft may replace")


def write_drafts(spec: Spec, rubric: dict[str, Any] | None, cases: list[dict[str, Any]], *, force: bool = False) -> list[Path]:
    """Write the drafts as editable YAML: into the file the spec names for each (``spec.draft_files``), else
    beside the spec as ``<spec>.rubric.yaml`` and ``<spec>.cases.yaml``; never overwrite edits unless ``force``."""
    written = []
    targets = []

    def place(kind: str, field: str) -> tuple[Path, str]:
        path = draft_place(spec, kind)
        if kind in spec.draft_files:
            return path, f"# Edit freely: the spec already names this file ({field}), and run uses it as it is.\n"
        shown = f"{field}: {path.name}" if kind == "rubric" else f"design: {{cases: {path.name}}}"
        return path, f"# Edit freely, then point the spec at this file:  {shown}\n"

    if rubric is not None:
        doc = {"criteria": rubric["criteria"]}
        from ..sim import draft_note

        note = draft_note(spec)
        path, point = place("rubric", "rubric")
        header = (
            f"# Rubric drafted by {spec.design.generator.model} for '{spec.concept.name}'.\n"
            + (f"# [simulated] {note}.\n" if note else "")
            + point
            + "".join(f"# discarded: {d.get('name')}: {d.get('reason')}\n" for d in rubric.get("discarded", []))
        )
        targets.append((path, header, doc))
    if cases:
        path, point = place("cases", "design.cases")
        header = f"# {len(cases)} test cases drafted by {spec.design.generator.model}.\n" + point
        targets.append((path, header, {"cases": cases}))
    check_draft_places(spec, ["rubric"] * (rubric is not None) + ["cases"] * bool(cases), force=force)
    from multiverse.core import atomic_write_text

    for path, header, doc in targets:
        text = header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
        atomic_write_text(path, text)
        written.append(path)
    return written
