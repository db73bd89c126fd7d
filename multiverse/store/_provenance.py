"""Provenance: what a stored record says about how it was made.

Every record the engine stores carries the model asked for and the models
that answered, the parameters, token usage, cost, the number of calls, when it
started, how long it took and the package versions. A run's manifest sums the
provenance of the records it computed, so its totals are the same whichever
backend (threads or Dask workers) made the calls.
"""

from __future__ import annotations

import functools
import platform
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from multiverse.core import __version__
from multiverse.store._records import Call, Provenance

__all__ = ["call_of", "provenance", "versions"]


def versions() -> dict[str, str]:
    """The versions of multiverse, Python and the libraries that shape results."""
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:
    # Read once per process: importlib.metadata parses each package's METADATA
    # file on every look-up, which was a quarter of a run's CPU per model call.
    from importlib.metadata import PackageNotFoundError, version

    out = {"multiverse": __version__, "python": platform.python_version()}
    for package in ("litellm", "pandas", "numpy", "statsmodels"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            pass
    return out


def call_of(completion: Any) -> Call:
    """One call's entry (model reported, usage, cost, requests sent) from a completion."""
    return {"model_reported": completion.model_reported, "usage": dict(completion.usage), "cost": completion.cost,
            "requests": int(completion.attempts)}


def provenance(config: Any, started: float, calls: Iterable[Mapping[str, Any]] = ()) -> Provenance:
    """The provenance of a record made by ``calls`` to the model ``config`` since ``started`` (epoch seconds).

    ``calls`` counts what went over the wire (each call's ``requests``: its
    retries and repair request included); ``reused`` the calls answered from
    the request store without a request.
    """
    calls = list(calls)
    usage: dict[str, int] = defaultdict(int)
    for call in calls:
        for k, v in (call.get("usage") or {}).items():
            usage[k] += int(v or 0)
    return {
        "model_requested": config.model if config else None,
        "model_reported": sorted({c["model_reported"] for c in calls if c.get("model_reported")}),
        "params": dict(config.params) if config else {},
        "usage": dict(usage),
        "cost": sum(c.get("cost") or 0.0 for c in calls),
        "calls": sum(int(c.get("requests", 1)) for c in calls),
        "started": datetime.fromtimestamp(started, timezone.utc).isoformat(),
        "seconds": round(time.time() - started, 3),
        "versions": versions(),
        "reused": sum(1 for c in calls if c.get("requests", 1) == 0),
    }
