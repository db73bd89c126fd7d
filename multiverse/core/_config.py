"""Config types shared by the spec and the model layer.

The spec validates these; the model layer (``llm``, the executor) consumes
them. Both import them from here, so the model layer never imports the spec.

* :class:`ModelConfig`: a litellm model string with its call parameters.
* :class:`RateLimit`: how fast calls to the models under one prefix may go.
* :class:`Frozen` and :class:`FrozenMap`: the immutable building blocks of
  every spec section (a spec is a value: universes share it across threads
  and processes).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from multiverse.errors import InputError

__all__ = [
    "Frozen",
    "FrozenMap",
    "ModelConfig",
    "RateLimit",
    "expand_env",
    "seconds_setting",
]


@dataclass(frozen=True)
class ModelConfig:
    """A litellm model string with its call parameters (never a key)."""

    model: str
    params: Mapping[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None


_ENV_DEFAULT = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def seconds_setting(raw: str, where: str) -> float:
    """A timeout setting's text as seconds, above 0 and at most a day; anything else is refused naming ``where``.

    The remote backends (a store server, a Dask scheduler) read their waits from environment variables and URLs,
    which are text: one rule says what a wait may be.
    """
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > 86400:
        raise InputError(f"{where}: expected a number of seconds above 0 and at most 86400, got {raw!r}")
    return value


def expand_env(text: str | None) -> str | None:
    """Expand ``${VAR}`` and ``${VAR:-default}`` (used for ``api_base`` only).

    A spec names where a server listens without hard-coding a port; the
    universe id keeps the unexpanded text, so it is the same on every machine.
    """
    if text is None:
        return None
    return _ENV_DEFAULT.sub(lambda m: os.environ.get(m.group(1)) or (m.group(2) or ""), text)


class FrozenMap(Mapping[str, Any]):
    """A read-only mapping that pickles (``MappingProxyType`` does not), so a
    spec can travel to worker processes."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None):
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[type[FrozenMap], tuple[dict[str, Any]]]:
        return (FrozenMap, (self._data,))


class Frozen(BaseModel):
    """Base of every spec section: immutable, no unknown keys, no type coercion.

    Strict, because a spec is hand-written YAML: ``"3"`` where a number belongs
    is a mistake to report, not to guess at. Assigning a field raises
    ``AttributeError``, as on any frozen Python object.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__private_attributes__:
            super().__setattr__(name, value)
            return
        raise AttributeError(f"{type(self).__name__} is frozen; cannot assign {name!r} (use model_copy(update=...))")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen; cannot delete {name!r}")


class RateLimit(Frozen):
    """How fast calls to the models under one model-string prefix may go."""

    rpm: int | None = Field(default=None, gt=0, description="requests per minute")
    tpm: int | None = Field(default=None, gt=0, description="tokens per minute (prompt + completion)")
    max_concurrency: int | None = Field(default=None, gt=0, description="calls in flight at once")

    @model_validator(mode="after")
    def _one_given(self) -> RateLimit:
        if self.rpm is None and self.tpm is None and self.max_concurrency is None:
            raise ValueError("expected at least one of rpm, tpm, max_concurrency")
        return self

