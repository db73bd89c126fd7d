"""Model names that can be checked offline, before any call: a registry the model layer keeps.

Most providers can only be asked over the network whether a model exists.
Some know their models offline — the simulated world does: its models are
the names its world file declares. Such a provider registers a checker here,
and ``validate`` asks this registry, never the provider's package directly, so
a spec typo such as ``sim/judge-z`` is refused with the valid names listed
instead of failing every unit of the run.

A checker is ``check(name, role, api_base, persona) -> [(field, problem)]``:
``name`` is the model string without its provider prefix, ``role`` one of
:data:`ROLES`, ``api_base`` what the spec resolves for that model (for
``sim/``: the world), ``persona`` the simulated user's persona (role
``user`` only); ``field`` is ``"model"`` or ``"persona"``. A checker that
cannot decide (its world does not load, say) returns nothing: other checks
report that.

The spec's ``world:`` (where ``sim/`` models live) is checked the same way:
the provider that serves worlds registers a world checker
``check(world, base_dir) -> problem or None`` with :func:`register_world`, and
the spec asks :func:`check_world`, so the spec never imports the simulator.

This module names no provider's package: the package root, which sits above
every room, says how to load a provider's checkers (:func:`register_loader`),
so checking a spec imports a provider only when the spec names it, and the
ground floor never reaches up to the simulator.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "ROLES",
    "SIM_PREFIX",
    "WORLD_PROVIDER",
    "check",
    "check_world",
    "is_simulated",
    "register",
    "register_loader",
    "register_world",
]

#: role in the spec -> what the role needs of a model
ROLES = ("system", "judge", "user", "generator", "tool_simulator")

Checker = Callable[[str, str, "str | None", "str | None"], list[tuple[str, str]]]

WorldChecker = Callable[[str, Path], "str | None"]

#: The provider whose models live in the spec's ``world:``: the simulator.
WORLD_PROVIDER = "sim"
#: How a simulated model's name begins (``sim/judge-a``): the one place the prefix is written.
SIM_PREFIX = f"{WORLD_PROVIDER}/"

_checkers: dict[str, Checker] = {}
_world_checkers: dict[str, WorldChecker] = {}
_loaders: dict[str, Callable[[], object]] = {}
_lock = threading.Lock()


def is_simulated(model: object) -> bool:
    """Whether ``model`` (a model name) is one of the simulator's, which answers offline, free and labelled."""
    return str(model).startswith(SIM_PREFIX)


def register(provider: str, checker: Checker) -> None:
    """Declare that ``provider``'s model names can be checked offline by ``checker``."""
    with _lock:
        _checkers[provider] = checker


def register_loader(provider: str, load: Callable[[], object]) -> None:
    """Declare that calling ``load`` registers ``provider``'s checkers (it imports the provider's package)."""
    with _lock:
        _loaders[provider] = load


def _loaded(provider: str) -> None:
    load = _loaders.get(provider)
    if load is not None:
        load()


def register_world(provider: str, checker: WorldChecker) -> None:
    """Declare that ``provider`` serves the spec's ``world:`` and ``checker`` says what is wrong with one."""
    with _lock:
        _world_checkers[provider] = checker


def check_world(world: str, base_dir: Path) -> str | None:
    """What is wrong with a spec's ``world:`` (a built-in name or a YAML path relative to ``base_dir``), or None."""
    checker = _world_checkers.get(WORLD_PROVIDER)
    if checker is None:
        _loaded(WORLD_PROVIDER)
        checker = _world_checkers.get(WORLD_PROVIDER)
    if checker is None:  # pragma: no cover - the package root registers the provider's loader
        raise RuntimeError(f"the {WORLD_PROVIDER!r} provider registered no world checker")
    return checker(world, Path(base_dir))


def check(model: str, role: str, *, api_base: str | None = None, persona: str | None = None) -> list[tuple[str, str]]:
    """Problems with ``model`` in ``role`` that are knowable offline, as ``(field, problem)`` pairs."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: expected one of {ROLES}")
    provider, _, name = model.partition("/")
    checker = _checkers.get(provider)
    if checker is None and provider in _loaders:
        _loaded(provider)
        checker = _checkers.get(provider)
    if checker is None:
        return []
    return list(checker(name, role, api_base, persona))
