"""Offline checks of a spec's ``world:`` and its ``sim/`` model names and personas, for ``validate``.

Registered with ``multiverse.core.model_names`` when this package is imported,
so the spec never imports the simulated world to check a name.
"""

from __future__ import annotations

from pathlib import Path

from multiverse.core import SIM_PREFIX

from ..errors import SpecError
from ._loader import builtin_worlds, load_world
from ._world import User

__all__ = ["check_name", "check_world"]


def check_world(world: str, base_dir: Path) -> str | None:
    """What is wrong with a spec's ``world:`` (a built-in name or a YAML file beside the spec), or None."""
    builtin = ", ".join(builtin_worlds())
    if world.endswith((".yaml", ".yml")):
        path = base_dir / world
        if not path.is_file():
            return f"world file {world!r} not found next to the spec; expected a YAML file or one of the built-in worlds ({builtin})"
        try:
            load_world(path)
        except SpecError as exc:
            return f"{exc}"
        return None
    if world not in builtin_worlds():
        return f"unknown built-in world {world!r}; expected one of: {builtin}, or a path to a .yaml world file"
    return None

# Which kinds of world model can play each role of a spec (see respond._TASKS).
_KINDS = {
    "system": ("target",),
    "judge": ("judge",),
    "user": ("user",),
    "generator": ("generator",),
    "tool_simulator": ("tool_simulator", "generator"),
}


def check_name(name: str, role: str, api_base: str | None, persona: str | None) -> list[tuple[str, str]]:
    """``[(field, problem)]`` for a ``sim/<name>`` model in ``role`` (empty when fine or undecidable)."""
    try:
        world = load_world(api_base)
    except SpecError:
        return []  # the spec's world check says what is wrong with the world itself
    kinds = _KINDS[role]
    fitting = sorted(n for n, m in world.models.items() if m.kind in kinds)
    model = world.models.get(name)
    if model is None or model.kind not in kinds:
        what = "an unknown model" if model is None else f"a {model.kind}, not a {' or '.join(kinds)}"
        listed = ", ".join(f"{SIM_PREFIX}{n}" for n in fitting) or "(none declared)"
        return [("model", f"{SIM_PREFIX}{name} is {what} in world '{world.name}'; expected one of: {listed}")]
    if role == "user" and persona and isinstance(model, User) and persona not in model.personas:
        listed = ", ".join(sorted(model.personas)) or "(none declared)"
        problem = f"unknown persona {persona!r} for sim/{name} in world '{world.name}'; expected one of: {listed}, or no persona"
        return [("persona", problem)]
    return []
