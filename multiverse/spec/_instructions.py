"""The spec's instructions to models: the templates' placeholders, and who judges a spec that names no judge.

Every instruction a generator, simulated user, tool simulator or judge reads
is a spec field (``judge.template``, ``rollout.user.template``, ...), null for
the built-in text. A template is ``str.format`` text: its placeholders are
checked here, at ``validate``, so that a typo is refused in one line naming
the field and the placeholders it may use, never sent to a paid model. System
prompts are sent as written (a brace in them is just a brace).
"""

from __future__ import annotations

import string
from collections.abc import Iterator, Mapping
from typing import Any

from multiverse.core import is_simulated
from multiverse.spec._models import DEFAULT_JUDGE, Spec
from multiverse.spec._problems import Problems

__all__ = ["DEFAULT_JUDGE", "check_judge_named", "check_templates", "template_placeholders"]


def template_placeholders(field: str, scale: str = "binary") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(allowed, required) placeholders of the template at spec path ``field`` (a judge's depend on its scale)."""
    if field == "judge.template":
        if scale == "pairwise":
            return ("rubric", "scale", "anchors", "first", "second"), ("first", "second")
        if scale == "binary":
            return ("rubric", "transcript"), ("transcript",)
        return ("rubric", "scale", "anchors", "transcript"), ("transcript",)
    return {
        "design.generator.template": ("concept", "context", "behaviour", "cell", "number", "tools"),
        "design.generator.rubric_template": ("name", "description", "context"),
        "rollout.user.template": ("persona", "instructions", "brief", "end_marker"),
        "rollout.tool_simulator.template": ("tool",),
    }[field], ()


def _templates(spec: Spec) -> Iterator[tuple[str, str | None]]:
    yield "design.generator.template", spec.design.generator.template
    yield "design.generator.rubric_template", spec.design.generator.rubric_template
    yield "rollout.user.template", spec.rollout.user.template
    yield "rollout.tool_simulator.template", spec.rollout.tool_simulator.template
    yield "judge.template", spec.judge.template


def _braces(names: tuple[str, ...]) -> str:
    return ", ".join("{" + n + "}" for n in names)


def _template_problem(text: str, allowed: tuple[str, ...], required: tuple[str, ...]) -> str | None:
    expected = f"expected only the placeholders {_braces(allowed)} (write {{{{ and }}}} for a literal brace)"
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        return f"is not a template ({exc}); {expected}"
    used = []
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in allowed or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            return f"unknown placeholder {shown}; {expected}"
        used.append(name)
    missing = [n for n in required if n not in used]
    if missing:
        return f"has no {_braces(tuple(missing))}; expected it, or the model never sees what it is asked about"
    return None


def check_templates(spec: Spec, problems: Problems) -> None:
    """Refuse a template with a placeholder its field does not fill, or without the one it must show."""
    for field, text in _templates(spec):
        if text is None:
            continue
        allowed, required = template_placeholders(field, spec.judge.scale.type)
        wrong = _template_problem(text, allowed, required)
        if wrong:
            problems.add(field, wrong)


def _models_in(value: Any) -> Iterator[str]:
    """Every ``model:`` string in a patch value (a whole section or list of systems may be patched)."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if key == "model" and isinstance(inner, str):
                yield inner
            else:
                yield from _models_in(inner)
    elif isinstance(value, (list, tuple)):
        for inner in value:
            yield from _models_in(inner)


def _names_judge(patch: Mapping[str, Any]) -> bool:
    judge = patch.get("judge")
    return "judge.model" in patch or (isinstance(judge, Mapping) and "model" in judge)


def check_judge_named(spec: Spec, problems: Problems) -> None:
    """A spec must name its judge unless every model it calls is simulated (then ``sim/judge-a`` judges).

    A judge is named in the spec's ``judge.model``, or by an axis each of whose options sets it.
    """
    document = spec.document or {}
    judge = document.get("judge")
    if isinstance(judge, Mapping) and "model" in judge:
        return
    if any(options and all(_names_judge(patch) for patch in options.values()) for options in spec.axes.values()):
        return
    models = [s.model for s in spec.systems]
    models += [spec.design.generator.model, spec.rollout.user.model, spec.rollout.tool_simulator.model]
    for options in spec.axes.values():
        for patch in options.values():
            for dotted, value in patch.items():
                models += [value] if dotted.split(".")[-1] == "model" and isinstance(value, str) else []
                models += list(_models_in(value))
    real = sorted({m for m in models if not is_simulated(m)})
    if real:
        problems.add("judge", f"names no judge model, and {', '.join(real)} is not simulated; expected judge: "
                     f"{{model: ...}} (the default {DEFAULT_JUDGE} judges only a spec whose every model is sim/)")
