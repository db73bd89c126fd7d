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
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

__all__ = ["ROLES", "check", "register"]

#: role in the spec -> what the role needs of a model
ROLES = ("system", "judge", "user", "generator", "tool_simulator")

Checker = Callable[[str, str, "str | None", "str | None"], list[tuple[str, str]]]

_checkers: dict[str, Checker] = {}
_lock = threading.Lock()
# Providers whose package registers a checker when imported, named so that
# checking a spec imports a provider's package only when the spec names it.
_REGISTERED_ON_IMPORT = {"sim": "multiverse.sim"}


def register(provider: str, checker: Checker) -> None:
    """Declare that ``provider``'s model names can be checked offline by ``checker``."""
    with _lock:
        _checkers[provider] = checker


def check(model: str, role: str, *, api_base: str | None = None, persona: str | None = None) -> list[tuple[str, str]]:
    """Problems with ``model`` in ``role`` that are knowable offline, as ``(field, problem)`` pairs."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: expected one of {ROLES}")
    provider, _, name = model.partition("/")
    checker = _checkers.get(provider)
    if checker is None and provider in _REGISTERED_ON_IMPORT:
        importlib.import_module(_REGISTERED_ON_IMPORT[provider])
        checker = _checkers.get(provider)
    if checker is None:
        return []
    return list(checker(name, role, api_base, persona))
