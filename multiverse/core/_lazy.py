"""A package's names imported on first use: the ``__getattr__`` and ``__dir__`` of a lazy ``__init__``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, homes: Mapping[str, str], modules: Collection[str] = ()) -> tuple[
        Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``, whose public ``homes`` (name -> the module
    that defines it) are imported when first asked for; a name in ``modules`` is that module itself.

    A name is looked up in its home on every access, never copied into the package: the home stays the
    one place to replace it (tests swap the engine's run for a counter).
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = import_module(home)
        return module if name in modules else getattr(module, name)

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
