"""What the simulated world can stand in for: its own criteria, nothing else.

The world's targets, users and judges act on the criteria its file declares
(with their propensities, phrases and judge rates); a rubric criterion it does
not declare has no behaviour there, so a rate over it measures nothing (every
transcript compliant, every rate near 1). The simulated generator likewise
drafts the world's own criteria, whatever concept the spec names. These notes
say so in one line, for ``validate``, ``run`` and ``draft`` to show.
"""

from __future__ import annotations

from typing import Any

from multiverse.core import is_simulated

__all__ = ["draft_note", "unknown_criteria_note"]


def _world(spec: Any) -> Any:
    from multiverse.work import world_uri

    from ._loader import load_world

    return load_world(world_uri(spec))


def _uses_sim(spec: Any) -> bool:
    """Whether a system or the judge is simulated in some universe: the roles that act on, or rate, criteria."""
    models = [spec.judge.model, *(s.model for s in spec.systems)]
    for options in spec.axes.values():
        for patch in options.values():
            models += [v for path, v in patch.items()
                       if path.startswith(("judge.", "systems")) and path.endswith("model") and isinstance(v, str)]
    return any(is_simulated(m) for m in models)


def unknown_criteria_note(spec: Any) -> str | None:
    """One line when sim/ models would judge rubric criteria their world has no behaviour for, else None."""
    if not _uses_sim(spec):
        return None
    world = _world(spec)
    unknown = [c.id for c in spec.rubric.criteria if c.id not in world.criteria]
    if not unknown:
        return None
    shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    return (f"the simulated world {world.name!r} acts only on its own criteria ({', '.join(world.criteria)}); "
            f"the rubric's {shown} have no behaviour there, so their rates are meaningless "
            "(audit them with real models, or add them to a world file of your own)")


def draft_note(spec: Any) -> str | None:
    """One line when the simulated generator drafts the rubric: it drafts its world's criteria, not the concept's."""
    if not is_simulated(spec.design.generator.model):
        return None
    world = _world(spec)
    return (f"the simulated generator drafts the criteria of its world {world.name!r} "
            f"({', '.join(list(world.criteria)[:3])}, ...), whatever the concept ({spec.concept.name!r}); "
            "draft with a real model to get criteria for the concept")
