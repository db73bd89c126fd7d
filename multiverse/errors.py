"""The exception hierarchy of multiverse.

::

    MultiverseError            anything multiverse raises on purpose (CLI exit 1)
     ├── SpecError             a spec, rubric or cases file is malformed (CLI exit 2)
     ├── InputError            a table, flag or import directory is malformed (CLI exit 2)
     ├── StoreError            the store vanished or lost entries during a run (CLI exit 1)
     │    └── StoreUnavailable the store's server cannot be reached or stops answering (also an
     │                         InputError: CLI exit 2, like an unreachable scheduler)
     ├── ModelError            a model call failed after its retries (recorded, never a label)
     │    └── BudgetExceeded   the next call would pass the run's budget cap
     └── ModelUnusable         every call of one model fails the same way: the run stops

Messages are one line: ``<file>: <YAML path or column>: <what was expected>``.
"""

from __future__ import annotations

__all__ = ["BudgetExceeded", "InputError", "ModelError", "ModelUnusable", "MultiverseError", "SpecError", "StoreError",
           "StoreUnavailable"]


class MultiverseError(Exception):
    """Base class of every error multiverse raises on purpose."""


class SpecError(MultiverseError):
    """A spec, rubric or cases file does not describe a valid audit."""

    def __init__(self, file: object, path: str, expected: str):
        self.file = str(file)
        self.path = path
        self.expected = expected
        where = f"{self.file}: {path}" if path else self.file
        super().__init__(f"{where}: {expected}")


class InputError(MultiverseError):
    """A results table, argument or import directory is unusable.

    ``param`` names the Python parameter at fault (``backend``, ``budget``...)
    when there is one. The library words its messages in parameter names and
    never in command-line flags; the CLI maps ``param`` to its own flag.
    """

    def __init__(self, message: str, *, param: str | None = None):
        super().__init__(message)
        self.param = param


class StoreError(MultiverseError):
    """The store was removed, or lost entries this run wrote, while the run used it."""


class StoreUnavailable(StoreError, InputError):
    """The store's database server refused the connection, or said nothing within its timeout.

    A :class:`StoreError` (the store failed) and an :class:`InputError` about
    ``store`` (the address given does not serve a store now), as a Dask
    scheduler that cannot be reached is one about ``scheduler``.
    """

    def __init__(self, message: str):
        super().__init__(message, param="store")


class ModelError(MultiverseError):
    """A model call failed for good. ``reason`` is a short machine-readable cause.

    ``requests`` is how many requests went over the wire for the call, when
    the raiser knows (``None``: unknown; 0: none was sent for it).
    """

    def __init__(self, message: str, *, reason: str = "error", retryable: bool = False):
        super().__init__(message)
        self.reason = reason
        self.retryable = retryable
        self.requests: int | None = None


class BudgetExceeded(ModelError):
    """Scheduling the next call would exceed the run's budget cap."""

    def __init__(self, message: str):
        super().__init__(message, reason="budget_exceeded", retryable=False)


class ModelUnusable(MultiverseError):
    """A model failed every call so far with the same non-retryable error: the run stops.

    Not a ``ModelError``: those are recorded per unit and the run goes on.
    """
