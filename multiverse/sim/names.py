"""Offline checks of ``sim/`` model names and personas against the world, for ``validate``.

Registered with :mod:`multiverse.model_names` when this package is imported,
so the spec never imports the simulated world to check a name.
"""

from __future__ import annotations

from ..errors import SpecError
from .loader import load_world
from .world import User

__all__ = ["check_name"]

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
        listed = ", ".join(f"sim/{n}" for n in fitting) or "(none declared)"
        return [("model", f"sim/{name} is {what} in world '{world.name}'; expected one of: {listed}")]
    if role == "user" and persona and isinstance(model, User) and persona not in model.personas:
        listed = ", ".join(sorted(model.personas)) or "(none declared)"
        problem = f"unknown persona {persona!r} for sim/{name} in world '{world.name}'; expected one of: {listed}, or no persona"
        return [("persona", problem)]
    return []
