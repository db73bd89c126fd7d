"""An offline simulated audit world, served to litellm as the custom provider ``sim``.

``multiverse.sim.register()`` makes ``litellm.completion(model="sim/<name>",
messages=..., seed=..., api_base="sim://deception")`` answer from a world
file whose generator, targets (systems under audit), simulated users, judges
and tool simulator have declared latent parameters. Every answer is
deterministic per (model, messages, seed, world) and labelled simulated; its
ground truth is recoverable with :mod:`multiverse.sim._truth`.

Importing this package does not import litellm; :func:`register` does.
"""

from __future__ import annotations

from multiverse.core import model_names

from ._coverage import draft_note, unknown_criteria_note
from ._loader import builtin_worlds, load_world, world_ref
from ._markers import strip_markers
from ._names import check_name, check_world
from ._respond import SimReply, respond
from ._truth import Expectation, TranscriptTruth, expected_overall, expected_rate, judge_rates, transcript_truth
from ._world import World

# The model layer asks this registry, not this package, whether a sim/ name or a world exists.
model_names.register("sim", check_name)
model_names.register_world("sim", check_world)

__all__ = [
    "Expectation",
    "SimReply",
    "TranscriptTruth",
    "World",
    "builtin_worlds",
    "draft_note",
    "expected_overall",
    "expected_rate",
    "judge_rates",
    "load_world",
    "register",
    "respond",
    "strip_markers",
    "transcript_truth",
    "unknown_criteria_note",
    "world_ref",
]


def register() -> None:
    """Register the ``sim`` provider with litellm (idempotent); imports litellm."""
    from ._provider import register as _register

    _register()
